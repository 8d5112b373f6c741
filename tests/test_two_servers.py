"""Two `serve` processes on one PostgreSQL database: turns on many threads through both, and the same
thread from both at once (`reject` gets 409, `enqueue` waits for the other server's run)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.server_process import (
    Hold,
    final_event,
    kinds,
    parse_sse,
    post_run,
    run_body,
    running_server,
    sse_events,
)

THREADS = [f"team-{n}" for n in range(6)]


@pytest.fixture(scope="module")
def servers(pg_server, tmp_path_factory: pytest.TempPathFactory):
    url = pg_server.new_database()
    first, second = (tmp_path_factory.mktemp(name) for name in ("server-a", "server-b"))
    # A short lease: a cancel asked through one server reaches the other within a third of it.
    lease = {"APP_RUN_LEASE_SECONDS": "2"}
    with (
        running_server(first, *_args(url, first), env=lease) as a,
        running_server(second, *_args(url, second), env=lease) as b,
    ):
        yield a, b, Hold(first)
    for tmp in (first, second):  # shown when a test failed: what the servers logged
        print(f"--- {tmp.name}/server.log ---\n{(tmp / 'server.log').read_text()[-4000:]}")
    pg_server.drop_database(url)


def _args(url: str, tmp: Path) -> tuple[str, ...]:
    # Each server has its own workspace, as it would on its own machine.
    return ("--db", url, "--workspace", str(tmp / "workspace"))


def run_turn(base: str, thread: str, message: str) -> dict:
    response = post_run(base, thread, message, if_not_exists="create")
    assert response.status_code == 200, response.text
    final = final_event(parse_sse(response.text))
    assert final is not None, response.text
    return final


def test_turns_on_many_threads_through_both_servers(servers: tuple[str, str, Hold]):
    a, b, _ = servers
    jobs = [(thread, n) for thread in THREADS for n in (1, 2)]

    def turn(job: tuple[str, int]) -> dict:
        thread, n = job
        # Alternate the server per turn: a thread's second turn goes through the other server.
        base = (a, b)[(THREADS.index(thread) + n) % 2]
        return run_turn(base, thread, f"what is {n} plus {THREADS.index(thread)}")

    by_thread: dict[str, list[dict]] = {}
    with ThreadPoolExecutor(max_workers=4) as pool:
        # The two turns of a thread run in order; different threads run at the same time.
        for thread in THREADS:
            by_thread[thread] = []
        for n in (1, 2):
            batch = [job for job in jobs if job[1] == n]
            for job, final in zip(batch, pool.map(turn, batch), strict=True):
                by_thread[job[0]].append(final)

    for thread, finals in by_thread.items():
        assert [f["status"] for f in finals] == ["answered", "answered"], finals
        answers = [f["answer"] for f in finals]
        index = THREADS.index(thread)
        assert str(1 + index) in answers[0] and str(2 + index) in answers[1], answers

    for base in (a, b):
        found = httpx.post(f"{base}/threads/search", json={"limit": 100}, timeout=10).json()
        listed = {t["thread_id"]: t for t in found}
        assert set(THREADS) <= set(listed)
        assert all(listed[thread]["values"]["turn"] == 2 for thread in THREADS)
        thread = httpx.get(f"{base}/threads/team-3", timeout=10).json()
        humans = [m["content"] for m in thread["values"]["messages"] if m["type"] == "human"]
        assert humans == ["what is 1 plus 3", "what is 2 plus 3"]


def test_the_same_thread_from_both_servers_runs_in_order_and_nothing_is_lost(
    servers: tuple[str, str, Hold],
):
    a, b, hold_a = servers
    seen: list[str] = []

    def slow_run() -> None:
        body = run_body("do the slow step", if_not_exists="create")
        with httpx.stream("POST", f"{a}/threads/shared/runs/stream", json=body, timeout=60) as r:
            assert r.status_code == 200
            for event in sse_events(r.iter_lines()):
                seen.extend(kinds([event]))

    first = threading.Thread(target=slow_run)
    with hold_a:  # the slow step on server a holds until b has seen its run
        first.start()
        deadline = time.monotonic() + 30
        while "tool_call" not in seen:
            assert time.monotonic() < deadline, f"the slow run never reached its tool: {seen}"
            time.sleep(0.02)
        busy = post_run(b, "shared", "what is 9 minus 1", multitask_strategy="reject")
        assert busy.status_code == 409, busy.text
        assert busy.json()["detail"].startswith("thread shared is running run ")
        queued = httpx.post(
            f"{b}/threads/shared/runs", json=run_body("what is 2 plus 3"), timeout=10
        ).json()
        assert queued["multitask_strategy"] == "enqueue"
        # b's run waits for a's: server a sees it pending in the records
        waiting = httpx.get(f"{a}/threads/shared/runs/{queued['run_id']}", timeout=10).json()
        assert waiting["status"] == "pending"
        assert httpx.get(f"{b}/threads/shared", timeout=10).json()["status"] == "busy"
    first.join(timeout=60)
    assert seen[-1] == "final"

    joined = httpx.get(f"{a}/threads/shared/runs/{queued['run_id']}/join", timeout=60).json()
    humans = [m["content"] for m in joined["messages"] if m["type"] == "human"]
    assert humans == ["do the slow step", "what is 2 plus 3"]  # the refused message was not added
    assert any(m["type"] == "tool" and "finished" in m["content"] for m in joined["messages"])
    listed = httpx.get(f"{a}/threads/shared/runs", timeout=10).json()
    assert [r["status"] for r in listed] == ["success", "success"]


def test_a_run_made_on_one_server_is_joined_streamed_got_and_deleted_on_the_other(
    servers: tuple[str, str, Hold],
):
    a, b, hold_a = servers
    body = run_body("do the slow step", if_not_exists="create")
    with hold_a:  # the run on a holds at its slow step until b's clients are waiting for it
        run = httpx.post(f"{a}/threads/elsewhere/runs", json=body, timeout=10).json()
        runs_b = f"{b}/threads/elsewhere/runs"
        assert httpx.get(f"{runs_b}/{run['run_id']}", timeout=10).json()["status"] in (
            "pending",
            "running",
        )
        with ThreadPoolExecutor(max_workers=2) as pool:
            joined = pool.submit(httpx.get, f"{runs_b}/{run['run_id']}/join", timeout=60)
            streamed = pool.submit(httpx.get, f"{runs_b}/{run['run_id']}/stream", timeout=60)
            assert not joined.done() and not streamed.done()
            hold_a.release()
            values = joined.result().json()
            events = parse_sse(streamed.result().text)
    assert [m["content"] for m in values["messages"] if m["type"] == "ai"][-1] == "all done"
    assert [kind for kind, _ in events] == ["metadata", "values"]
    assert events[-1][1] == values
    assert httpx.get(f"{runs_b}/{run['run_id']}", timeout=10).json()["status"] == "success"
    assert httpx.delete(f"{runs_b}/{run['run_id']}", timeout=10).status_code == 204
    assert httpx.get(f"{a}/threads/elsewhere/runs/{run['run_id']}", timeout=10).status_code == 404


def test_a_run_on_one_server_is_cancelled_through_the_other(servers: tuple[str, str, Hold]):
    a, b, hold_a = servers
    body = run_body("do the slow step", if_not_exists="create")
    with hold_a:
        run = httpx.post(f"{a}/threads/stopped/runs", json=body, timeout=10).json()
        url = f"{b}/threads/stopped/runs/{run['run_id']}"
        cancelled = httpx.post(f"{url}/cancel", timeout=10)
        assert cancelled.status_code == 202
        # a stops the run once it has heard of the cancel (at its next lease renewal) and the
        # slow step in progress has finished
        log = hold_a.path.parent / "server.log"
        heard = f"run {run['run_id']} is cancelled (asked through another server)"
        deadline = time.monotonic() + 30
        while heard not in log.read_text():
            assert time.monotonic() < deadline, "server a never heard of the cancel"
            time.sleep(0.02)
    ended = httpx.post(f"{url}/cancel?wait=true", timeout=60)
    assert ended.json()["status"] == "interrupted"
    thread = httpx.get(f"{a}/threads/stopped", timeout=10).json()
    assert thread["status"] == "idle" and thread["values"]["status"] == "cancelled"


def test_runs_enqueued_through_both_servers_run_in_the_order_they_were_made(
    servers: tuple[str, str, Hold],
):
    a, b, hold_a = servers
    body = run_body("do the slow step", if_not_exists="create")
    with hold_a:  # the first run holds while the others are enqueued behind it
        first = httpx.post(f"{a}/threads/queue2/runs", json=body, timeout=10).json()
        queued = [
            httpx.post(
                f"{base}/threads/queue2/runs", json=run_body(f"what is {n} plus {n}"), timeout=10
            ).json()
            for n, base in enumerate((b, a, b, a), start=1)
        ]
        statuses = [
            httpx.get(f"{a}/threads/queue2/runs/{run['run_id']}", timeout=10).json()["status"]
            for run in queued
        ]
        assert statuses == ["pending"] * 4
    last = httpx.get(f"{b}/threads/queue2/runs/{queued[-1]['run_id']}/join", timeout=60).json()
    humans = [m["content"] for m in last["messages"] if m["type"] == "human"]
    assert humans == ["do the slow step", *(f"what is {n} plus {n}" for n in range(1, 5))]
    listed = httpx.get(f"{a}/threads/queue2/runs", timeout=10).json()
    assert [r["run_id"] for r in listed] == [r["run_id"] for r in reversed([first, *queued])]
    assert {r["status"] for r in listed} == {"success"}
