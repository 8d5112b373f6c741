"""Crons through the official SDK (langgraph-sdk, unchanged) against real `serve` processes: create,
create_for_thread, search, count, update, delete and their 4xx; due crons fire on the server's
clock (APP_NOW), exactly once with two servers on one PostgreSQL database; the claim itself on both
backends."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from app.config import load_settings
from app.db import open_database
from app.db.crons import CronRecord
from app.server.standard.cron_scheduler import CronScheduler, instant
from app.server.standard.crons import CronCreate, new_cron
from app.server.standard.runs import Runs
from app.service import api
from tests.server_process import REPO, _wait_for_url, running_server
from tests.test_langgraph_api import langgraph_dev, needs_langgraph_cli  # noqa: F401 (a fixture)

CRON_SERVER = REPO / "tests" / "scripts" / "cron_server.py"
CREATED = datetime(2026, 6, 15, 10, 30, tzinfo=UTC)  # when the tests make their crons (APP_NOW)
LATER = "2026-06-15T10:31:00+00:00"  # the servers' clock in the firing tests: every-minute is due
WAYPOINT_ID = "fa1f57a9-7612-5e7f-8c6b-4768848d3e9a"  # uuid5 of the graph id, as LangGraph makes it
CRON_KEYS = {
    "cron_id",
    "assistant_id",
    "thread_id",
    "user_id",
    "end_time",
    "schedule",
    "timezone",
    "payload",
    "next_run_date",
    "metadata",
    "on_run_completed",
    "enabled",
    "created_at",
    "updated_at",
}


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("crons")
    # pinned here: a module's server starts before the function-scoped pin of tests/conftest.py
    with pytest.MonkeyPatch.context() as env:
        env.setenv("APP_NOW", instant(CREATED))
        with running_server(tmp, "--db", str(tmp / "agent.sqlite")) as base:
            yield get_sync_client(url=base)


def status_of(call: Callable[[], object]) -> tuple[int, str]:
    with pytest.raises(httpx.HTTPStatusError) as raised:
        call()
    response = raised.value.response
    return response.status_code, response.json()["detail"]


def test_create_search_count_update_and_delete_through_the_sdk(client: Any):
    thread = client.threads.create()["thread_id"]
    every_5 = client.crons.create(
        "waypoint",
        schedule="*/5 * * * *",
        input=user("what is 2 plus 3"),
        metadata={"owner": "ana"},
        on_run_completed="keep",
    )
    assert set(every_5) == CRON_KEYS
    assert every_5["assistant_id"] == WAYPOINT_ID and every_5["thread_id"] is None
    assert every_5["next_run_date"] == "2026-06-15T10:35:00+00:00"  # after the pinned 10:30
    assert every_5["payload"]["input"] == user("what is 2 plus 3")
    assert every_5["payload"]["schedule"] == "*/5 * * * *"  # the request, as LangGraph keeps it
    assert (every_5["enabled"], every_5["on_run_completed"]) == (True, "keep")
    assert every_5["metadata"] == {"owner": "ana"}

    mornings = client.crons.create_for_thread(
        thread,
        "waypoint",
        schedule="0 9 * * *",
        timezone="Europe/Paris",
        end_time=datetime(2027, 1, 1, tzinfo=UTC),
        input=user("good morning"),
        multitask_strategy="enqueue",
    )
    # 09:00 in Paris (UTC+2 in June) the next day, as LangGraph computes it
    assert mornings["next_run_date"] == "2026-06-16T07:00:00+00:00"
    assert (mornings["thread_id"], mornings["on_run_completed"]) == (thread, None)
    assert mornings["end_time"] == "2027-01-01T00:00:00+00:00"

    ids = {every_5["cron_id"], mornings["cron_id"]}
    assert {c["cron_id"] for c in client.crons.search()} == ids
    assert [c["cron_id"] for c in client.crons.search(thread_id=thread)] == [mornings["cron_id"]]
    assert [c["cron_id"] for c in client.crons.search(metadata={"owner": "ana"})] == [
        every_5["cron_id"]
    ]
    assert {c["cron_id"] for c in client.crons.search(assistant_id="waypoint")} == ids
    assert client.crons.search(assistant_id="waypoint-plan") == []
    soonest = client.crons.search(sort_by="next_run_date", sort_order="asc", limit=1)
    assert [c["cron_id"] for c in soonest] == [every_5["cron_id"]]
    picked = client.crons.search(thread_id=thread, select=["cron_id", "schedule"])
    assert picked == [{"cron_id": mornings["cron_id"], "schedule": "0 9 * * *"}]
    assert client.crons.count() == 2 and client.crons.count(thread_id=thread) == 1
    hourly = client.crons.create("waypoint", schedule="@hourly", input=user("hi"))
    assert hourly["next_run_date"] == "2026-06-15T11:00:00+00:00"
    client.crons.delete(hourly["cron_id"])

    changed = client.crons.update(
        every_5["cron_id"], schedule="0 * * * *", enabled=False, metadata={"team": "b"}
    )
    assert changed["schedule"] == "0 * * * *" and changed["enabled"] is False
    assert changed["next_run_date"] == "2026-06-15T11:00:00+00:00"
    assert changed["metadata"] == {"owner": "ana", "team": "b"}
    assert changed["payload"]["input"] == user("what is 2 plus 3")  # the run is kept
    assert changed["payload"]["schedule"] == "0 * * * *"
    assert [c["cron_id"] for c in client.crons.search(enabled=False)] == [every_5["cron_id"]]
    cleared = client.crons.update(mornings["cron_id"], end_time=None)
    assert cleared["end_time"] is None

    client.crons.delete(every_5["cron_id"])
    assert [c["cron_id"] for c in client.crons.search()] == [mornings["cron_id"]]
    client.crons.delete(mornings["cron_id"])
    assert client.crons.count() == 0


def test_bad_requests_are_4xx_with_a_detail(client: Any):
    thread = client.threads.create()["thread_id"]
    question = user("what is 2 plus 3")

    def create(**fields: Any) -> Callable[[], object]:
        fields = {"schedule": "* * * * *", "input": question, **fields}
        return lambda: client.crons.create(fields.pop("assistant", "waypoint"), **fields)

    status, detail = status_of(create(schedule="every minute"))
    assert status == 422 and "invalid cron schedule 'every minute'" in detail
    assert status_of(create(schedule="* * * * * *"))[0] == 422  # seconds: not a 5-field crontab
    assert status_of(create(schedule="@yearly-ish"))[0] == 422
    status, detail = status_of(create(timezone="Mars/Olympus"))
    assert status == 422 and "unknown time zone" in detail
    status, detail = status_of(create(assistant="nobody"))
    assert status == 404 and "assistant 'nobody' does not exist" in detail
    status, detail = status_of(create(input=None))
    assert status == 400 and '"input"' in detail
    status, detail = status_of(create(input={"messages": []}))
    assert status == 400
    status, detail = status_of(create(context={"approval": "auto"}))
    assert status == 403 and "--approve auto" in detail
    status, detail = status_of(
        lambda: client.crons.create_for_thread("no-such-thread", "waypoint", schedule="* * * * *")
    )
    assert status == 404 and "no-such-thread does not exist" in detail

    missing = "00000000-0000-0000-0000-000000000000"
    for call in (
        lambda: client.crons.delete(missing),
        lambda: client.crons.update(missing, enabled=False),
        lambda: client.http.get(f"/runs/crons/{missing}"),
    ):
        status, detail = status_of(call)
        assert status == 404 and f"cron {missing} does not exist" in detail
    with pytest.raises(httpx.HTTPStatusError) as raised:
        client.crons.delete(missing)
    assert raised.value.response.json()["error"] == "not_found"  # the usual body

    cron = client.crons.create_for_thread(thread, "waypoint", schedule="* * * * *", input=question)
    assert status_of(lambda: client.crons.update(cron["cron_id"]))[0] == 400  # nothing to change
    status, detail = status_of(lambda: client.crons.update(cron["cron_id"], schedule="61 * * * *"))
    assert status == 422 and "invalid cron schedule" in detail
    assert client.http.get(f"/runs/crons/{cron['cron_id']}")["schedule"] == "* * * * *"
    client.threads.delete(thread)


def test_deleting_a_thread_deletes_its_crons(client: Any):
    thread = client.threads.create()["thread_id"]
    question = user("what is 2 plus 3")
    client.crons.create_for_thread(thread, "waypoint", schedule="0 * * * *", input=question)
    client.crons.create_for_thread(thread, "waypoint", schedule="30 * * * *", input=question)
    stateless = client.crons.create("waypoint", schedule="0 * * * *", input=question)
    assert client.crons.count(thread_id=thread) == 2

    client.threads.delete(thread)
    assert client.crons.count(thread_id=thread) == 0
    assert [c["cron_id"] for c in client.crons.search()] == [stateless["cron_id"]]
    client.crons.delete(stateless["cron_id"])


# Firing ---------------------------------------------------------------------------------------


def store_cron(db: str, thread_id: str | None = None, **fields: Any) -> CronRecord:
    """A cron made at the tests' clock (10:30) through the route's own service, so that a server
    whose clock says 10:31 finds an every-minute cron due."""
    body = CronCreate(**{"assistant_id": "waypoint", "schedule": "* * * * *", **fields})
    return new_cron(load_settings(db=db), body, thread_id, CREATED)


def wait_for(what: str, check: Callable[[], object], seconds: float = 90) -> Any:
    """Poll until `check` gives something truthy (bounded): a run started by a server's scheduler."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def answered(thread: dict | None) -> bool:
    """The thread's run has ended with an answer."""
    if not thread or thread["status"] != "idle" or not thread["values"]:
        return False
    return thread["values"]["messages"][-1]["type"] == "ai"


def test_due_crons_fire_on_the_servers_clock(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
):
    db = str(db_path)
    with open_database(db) as database:
        api.create_thread(database, "mornings")
    on_thread = store_cron(db, "mornings", input=user("what is 2 plus 3"))
    kept = store_cron(
        db, input=user("what is 4 plus 5"), metadata={"job": "kept"}, on_run_completed="keep"
    )
    dropped = store_cron(db, input=user("what is 6 plus 7"), metadata={"job": "dropped"})
    later = store_cron(db, input=user("what is 1 plus 1"), schedule="0 11 * * *")
    assert on_thread.next_run_date == "2026-06-15T10:31:00+00:00"

    monkeypatch.setenv("APP_NOW", LATER)
    with running_server(tmp_path, "--db", db) as base:
        client = get_sync_client(url=base)
        thread = wait_for(
            "the thread's cron", lambda: answered(t := client.threads.get("mornings")) and t
        )
        humans = [m["content"] for m in thread["values"]["messages"] if m["type"] == "human"]
        assert humans == ["what is 2 plus 3"]
        assert "5" in thread["values"]["messages"][-1]["content"]

        made = wait_for("the kept thread", lambda: client.threads.search(metadata={"job": "kept"}))
        assert len(made) == 1
        assert made[0]["metadata"] == {
            "graph_id": "waypoint",
            "assistant_id": WAYPOINT_ID,
            "job": "kept",
        }
        wait_for("its answer", lambda: answered(client.threads.get(made[0]["thread_id"])))
        # on_run_completed delete (the default): the firing's thread goes when its run ends
        wait_for(
            "the dropped thread to go",
            lambda: not client.threads.search(metadata={"job": "dropped"}),
        )

        next_runs = {c["cron_id"]: c["next_run_date"] for c in client.crons.search()}
        # each fired once at 10:31; with the clock pinned, their next run never comes
        assert next_runs == {
            on_thread.cron_id: "2026-06-15T10:32:00+00:00",
            kept.cron_id: "2026-06-15T10:32:00+00:00",
            dropped.cron_id: "2026-06-15T10:32:00+00:00",
            later.cron_id: "2026-06-15T11:00:00+00:00",
        }
        assert not client.threads.search(metadata={"job": "later"})


def start_server(tmp: Path, barrier: Path, *args: str) -> subprocess.Popen:
    """`serve` whose scheduler waits at `barrier` after reading the due crons (the race below)."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    command = [sys.executable, str(CRON_SERVER), str(barrier), "--port", "0", *args]
    with open(tmp / "server.log", "wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)


def test_two_servers_on_one_database_fire_each_cron_once(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    crons = [
        store_cron(
            pg_url, input=user(f"what is {n} plus 1"), metadata={"cron": n}, on_run_completed="keep"
        )
        for n in range(4)
    ]
    with open_database(pg_url) as database:
        api.create_thread(database, "shared")
    store_cron(pg_url, "shared", input=user("what is 2 plus 2"))

    monkeypatch.setenv("APP_NOW", LATER)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    (barrier / "hold").touch()
    servers = [start_server(tmp_path / name, barrier, "--db", pg_url) for name in "ab"]
    try:
        # Both schedulers have read the same due crons before either claims one: a race for each.
        wait_for("both schedulers", lambda: len(list(barrier.glob("seen-*"))) == 2, seconds=60)
        (barrier / "hold").unlink()
        logs = (tmp_path / name / "server.log" for name in "ab")
        a, b = (
            get_sync_client(url=_wait_for_url(p, log)) for p, log in zip(servers, logs, strict=True)
        )
        for n in range(len(crons)):
            made = wait_for(f"cron {n}", lambda n=n: a.threads.search(metadata={"cron": n}))
            wait_for(f"cron {n}'s run", lambda t=made[0]["thread_id"]: answered(b.threads.get(t)))
        shared = wait_for("the shared thread", lambda: answered(t := a.threads.get("shared")) and t)
        # Every firing was claimed before the servers answered, and no cron is due again.
        for n in range(len(crons)):
            assert len(b.threads.search(metadata={"cron": n})) == 1
        assert len([m for m in shared["values"]["messages"] if m["type"] == "human"]) == 1
        assert {c["next_run_date"] for c in a.crons.search()} == {"2026-06-15T10:32:00+00:00"}
    finally:
        for process in servers:
            process.terminate()
        for process, name in zip(servers, "ab", strict=True):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            print(f"--- server {name} ---\n{(tmp_path / name / 'server.log').read_text()[-3000:]}")


@pytest.mark.usefixtures("isolated")
def test_a_firing_is_claimed_by_one_caller_only(database: str):
    cron = store_cron(database, input=user("what is 2 plus 3"))
    due, after = cron.next_run_date or "", "2026-06-15T10:32:00+00:00"
    with open_database(database) as first, open_database(database) as second:
        assert [c.cron_id for c in first.due_crons("2026-06-15T10:31:00+00:00")] == [cron.cron_id]
        assert first.due_crons("2026-06-15T10:30:59+00:00") == []
        assert first.claim_cron(cron.cron_id, due, after) is True
        assert second.claim_cron(cron.cron_id, due, after) is False  # the same firing, again
        assert second.due_crons("2026-06-15T10:31:00+00:00") == []
        assert second.cron(cron.cron_id).next_run_date == after
    assert instant(datetime(2026, 6, 15, 12, 31, 0, 500, tzinfo=UTC)) == "2026-06-15T12:31:00+00:00"


@pytest.mark.usefixtures("isolated")
def test_an_ended_or_disabled_cron_is_not_due(database: str):
    ended = store_cron(
        database, input=user("hi"), end_time=datetime(2026, 6, 15, 10, 30, 30, tzinfo=UTC)
    )
    off = store_cron(database, input=user("hi"), enabled=False)
    with open_database(database) as db:
        assert [c.cron_id for c in db.due_crons("2026-06-15T10:30:30+00:00")] == []  # not yet
        assert db.due_crons("2026-06-15T10:31:00+00:00") == []  # ended before its run
        db.update_cron(off.cron_id, {"enabled": True})
        assert [c.cron_id for c in db.due_crons("2026-06-15T10:31:00+00:00")] == [off.cron_id]
        assert ended.end_time == "2026-06-15T10:30:30+00:00"


@pytest.mark.usefixtures("isolated")
def test_a_cron_whose_stored_schedule_is_damaged_is_turned_off(db_path: Path):
    damaged = store_cron(str(db_path), input=user("hi"))
    with open_database(db_path) as database:
        database.update_cron(damaged.cron_id, {"schedule": "not a schedule"})
    settings = load_settings(db=str(db_path))
    scheduler = CronScheduler(settings, Runs(settings))

    assert scheduler.tick(datetime(2026, 6, 15, 10, 31, tzinfo=UTC)) == []  # nothing raised
    with open_database(db_path) as database:
        assert database.cron(damaged.cron_id).enabled is False


# The same cron script against LangGraph's own server -------------------------------------------


def cron_scenario(client: Any) -> dict:
    """What a client sees of crons, without ids and times (langgraph dev runs on the real clock)."""
    question = user("what is 2 plus 3")
    thread = client.threads.create()["thread_id"]
    daily = client.crons.create_for_thread(
        thread, "waypoint", schedule="0 9 * * *", timezone="Europe/Paris", input=question
    )
    stateless = client.crons.create(
        "waypoint", schedule="0 9 * * *", input=question, metadata={"scenario": "crons"}
    )
    changed = client.crons.update(stateless["cron_id"], enabled=False, metadata={"more": 1})
    seen = {
        "keys": sorted(daily),
        "daily": (daily["thread_id"] == thread, daily["schedule"], daily["timezone"]),
        "daily_run": (daily["on_run_completed"], daily["enabled"], daily["payload"]["input"]),
        "stateless": (stateless["thread_id"], stateless["on_run_completed"], stateless["metadata"]),
        "changed": (changed["enabled"], changed["metadata"]),
        "by_thread": [c["cron_id"] for c in client.crons.search(thread_id=thread)]
        == [daily["cron_id"]],
        "by_metadata": len(client.crons.search(metadata={"scenario": "crons"})),
        "counted": client.crons.count(thread_id=thread),
        "bad_schedule": status_of(
            lambda: client.crons.create("waypoint", schedule="x", input=question)
        )[0],
        "bad_zone": status_of(
            lambda: client.crons.create(
                "waypoint", schedule="0 9 * * *", timezone="Mars/X", input=question
            )
        )[0],
        "no_assistant": status_of(
            lambda: client.crons.create("nobody", schedule="0 9 * * *", input=question)
        )[0],
        "empty_update": status_of(lambda: client.crons.update(daily["cron_id"]))[0],
    }
    client.threads.delete(thread)
    seen["after_thread_delete"] = client.crons.count(thread_id=thread)
    client.crons.delete(stateless["cron_id"])
    seen["deleted_again"] = status_of(lambda: client.crons.delete(stateless["cron_id"]))[0]
    return seen


EXPECTED_SCENARIO = {
    "keys": sorted(CRON_KEYS),
    "daily": (True, "0 9 * * *", "Europe/Paris"),
    "daily_run": (None, True, user("what is 2 plus 3")),
    "stateless": (None, "delete", {"scenario": "crons"}),
    "changed": (False, {"scenario": "crons", "more": 1}),
    "by_thread": True,
    "by_metadata": 1,
    "counted": 1,
    "bad_schedule": 422,
    "bad_zone": 422,
    "no_assistant": 404,
    "empty_update": 400,
    "after_thread_delete": 0,
    "deleted_again": 404,
}


def test_the_cron_script_against_serve(client: Any):
    assert cron_scenario(client) == EXPECTED_SCENARIO


@needs_langgraph_cli
def test_the_same_cron_script_against_langgraph_dev(request: pytest.FixtureRequest):
    base, _ = request.getfixturevalue("langgraph_dev")  # tests/test_langgraph_api.py's server
    assert cron_scenario(get_sync_client(url=base)) == EXPECTED_SCENARIO


@pytest.mark.usefixtures("isolated")
def test_a_database_from_before_crons_gets_their_table_on_the_first_cron(db_path: Path):
    with open_database(db_path) as database:
        api.create_thread(database, "old")
        assert database.crons() == [] and database.due_crons(LATER) == []  # reading makes nothing
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        assert (
            conn.execute(
                "SELECT name FROM sqlite_master WHERE name LIKE 'waypoint_crons%'"
            ).fetchall()
            == []
        )
    made = store_cron(str(db_path), "old", input=user("hi"))
    with open_database(db_path) as database:
        assert [c.cron_id for c in database.crons()] == [made.cron_id]
        assert api.thread_view(database, "old").thread_id == "old"


@pytest.mark.usefixtures("isolated")
def test_a_database_the_scheduler_cannot_read_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    unusable = tmp_path / "a-directory"
    unusable.mkdir()
    settings = load_settings(db=str(unusable))
    scheduler = CronScheduler(settings, Runs(settings))
    with caplog.at_level(logging.ERROR, logger="waypoint.server.crons"):
        assert scheduler.look() == [] and scheduler.look() == []  # nothing raised
    [record] = caplog.records
    assert (
        "cannot read the crons" in record.getMessage() and "is a directory" in record.getMessage()
    )
