"""`serve`'s runs outlive their server process: answered from their records after a restart, gone
after delete, out of memory once finished, and carried on by a second server when the first is
killed mid-run (real `serve` processes, a real OpenAI-compatible endpoint that holds the request)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import HumanMessage

from app.config import load_settings
from app.db import open_database
from app.db.run_records import RunRecord
from app.server.api import create_app
from app.server.standard.run_recovery import Keeper
from app.server.standard.runs import Runs
from app.service.runtime import open_runtime
from tests.openai_server import OpenAIServer, hang, text
from tests.server_process import parse_sse, plain_server

WAIT = 60.0


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def background_run(base: str, thread: str, message: str) -> dict:
    body = {"assistant_id": "waypoint", "input": user(message), "if_not_exists": "create"}
    response = httpx.post(f"{base}/threads/{thread}/runs", json=body, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def test_runs_are_answered_from_their_records_after_a_restart(tmp_path: Path):
    db = ("--db", str(tmp_path / "agent.sqlite"), "--workspace", str(tmp_path / "workspace"))
    first_tmp, second_tmp = tmp_path / "first", tmp_path / "second"
    first_tmp.mkdir(), second_tmp.mkdir()
    with plain_server(first_tmp, *db) as (_, base):
        nine = background_run(base, "r", "what is 3 times 3")
        joined = httpx.get(f"{base}/threads/r/runs/{nine['run_id']}/join", timeout=WAIT).json()
        assert joined["messages"][-1]["content"] == "3 * 3 = 9"
        five = background_run(base, "r", "what is 2 plus 3")
        httpx.get(f"{base}/threads/r/runs/{five['run_id']}/join", timeout=WAIT)

    with plain_server(second_tmp, *db) as (_, base):
        runs = f"{base}/threads/r/runs"
        got = httpx.get(f"{runs}/{nine['run_id']}", timeout=10).json()
        assert got["status"] == "success" and got["created_at"] == nine["created_at"]
        assert got["kwargs"]["input"] == user("what is 3 times 3")
        listed = httpx.get(runs, timeout=10).json()
        assert [r["run_id"] for r in listed] == [five["run_id"], nine["run_id"]]
        # join answers the values the run ended with, not the thread's head
        joined = httpx.get(f"{runs}/{nine['run_id']}/join", timeout=WAIT).json()
        assert joined["messages"][-1]["content"] == "3 * 3 = 9"
        streamed = parse_sse(httpx.get(f"{runs}/{five['run_id']}/stream", timeout=WAIT).text)
        assert [kind for kind, _ in streamed] == ["metadata", "values"]
        assert streamed[-1][1]["messages"][-1]["content"] == "2 + 3 = 5"

        assert httpx.delete(f"{runs}/{nine['run_id']}", timeout=10).status_code == 204
        for gone in (f"{runs}/{nine['run_id']}", f"{runs}/{nine['run_id']}/join"):
            assert httpx.get(gone, timeout=10).status_code == 404
        assert httpx.delete(f"{base}/threads/r", timeout=10).status_code == 204
        assert httpx.get(f"{runs}/{five['run_id']}", timeout=10).status_code == 404


def test_a_finished_run_leaves_the_servers_memory():
    app = create_app(load_settings())
    client = TestClient(app, base_url="http://localhost")
    body = {
        "assistant_id": "waypoint",
        "input": user("what is 3 times 3"),
        "if_not_exists": "create",
    }
    run = client.post("/threads/m/runs", json=body).json()
    assert client.get(f"/threads/m/runs/{run['run_id']}/join").status_code == 200
    assert app.state.runs.live(run["run_id"]) is None
    assert client.get(f"/threads/m/runs/{run['run_id']}").json()["status"] == "success"


@pytest.fixture
def held_model(monkeypatch: pytest.MonkeyPatch) -> OpenAIServer:
    """A model endpoint whose first request is held (never answered) and whose second is answered;
    the servers this test starts use it, with a one-second run lease."""
    with OpenAIServer([hang(WAIT), text("resumed and answered")]) as endpoint:
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("APP_MODEL", "openai:test-model")
        monkeypatch.setenv("APP_RUN_LEASE_SECONDS", "1")
        yield endpoint


def wait_until(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_run_killed_with_its_server_is_resumed_by_a_second_server(
    database: str, held_model: OpenAIServer, tmp_path: Path
):
    args = ("--db", database, "--workspace", str(tmp_path / "workspace"))
    first_tmp, second_tmp = tmp_path / "first", tmp_path / "second"
    first_tmp.mkdir(), second_tmp.mkdir()
    with plain_server(first_tmp, *args) as (process, base):
        run = background_run(base, "k", "hello there")
        wait_until(lambda: held_model.completions, "the run's model request")
        process.kill()  # kill -9, mid-run: the model request is still held
        process.wait()

    with plain_server(second_tmp, *args) as (_, base):
        runs = f"{base}/threads/k/runs"
        joined = httpx.get(f"{runs}/{run['run_id']}/join", timeout=WAIT).json()
        assert [(m["type"], m["content"]) for m in joined["messages"]] == [
            ("human", "hello there"),
            ("ai", "resumed and answered"),
        ]
        assert httpx.get(f"{runs}/{run['run_id']}", timeout=10).json()["status"] == "success"
        thread = httpx.get(f"{base}/threads/k", timeout=10).json()
        assert thread["status"] == "idle" and thread["values"]["status"] == "answered"
    assert len(held_model.completions) == 2
    held_model.assert_done()
    assert "taking over run" in (second_tmp / "server.log").read_text()


class Ignored:
    """An event sink that drops everything (the turn is only set up)."""

    def emit(self, event: object) -> None:
        pass

    def partial_answer(self) -> str:
        return ""


def test_a_taken_over_run_that_would_repeat_a_side_effect_is_marked_and_its_step_closed(
    isolated: Path,
):
    settings = load_settings()
    dead = RunRecord(
        "run-fx",
        "fx",
        "waypoint",
        "pending",
        "2026-06-15T10:30:00.000000+00:00",
        "2026-06-15T10:30:00.000000+00:00",
        kwargs={"input": user("write 'hello' to a.txt")},
        owner="a-dead-server",
    )
    with open_database(settings.database) as db:  # its server started it, then died
        db.runs.add(dead, lease_seconds=-1)
        db.runs.start("run-fx", "a-dead-server", "2026-06-15T10:30:01.000000+00:00")
    with open_runtime(settings, approval="auto") as runtime:  # ... just before its tools ran
        turn = runtime.session("fx")._run(Ignored(), 1, {"turn": 1, "preview": "write"})
        message = HumanMessage("write 'hello' to a.txt", id="human-1")
        turn.drive({"messages": [message]}, interrupt_before=["tools"])

    runs = Runs(settings)
    Keeper(runs).tick()
    taken = runs.live("run-fx")
    assert taken is not None and taken.done.wait(WAIT)

    with open_database(settings.database) as db:
        record = db.runs.get("fx", "run-fx")
    assert record is not None and record.status == "error" and record.owner is None
    assert record.error["error"] == "RunLostError"
    assert "stopped while write_file ran" in record.error["message"]
    assert not (isolated / "workspace" / "a.txt").exists()  # not run a second time
    client = TestClient(create_app(settings), base_url="http://localhost")
    thread = client.get("/threads/fx").json()
    assert thread["status"] == "error" and thread["values"]["status"] == "cancelled"
    messages = thread["values"]["messages"]
    assert messages[-1]["type"] == "tool" and "interrupted" in messages[-1]["content"]
