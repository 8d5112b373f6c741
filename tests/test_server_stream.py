"""The server as a real uvicorn process: a second run on a busy thread gets 409, and a client that
disconnects mid-stream leaves the thread consistent (the run finishes in the background)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

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


@pytest.fixture(scope="module")
def server_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server")


@pytest.fixture(scope="module")
def server(server_dir: Path) -> str:
    db, workspace = server_dir / "db" / "agent.sqlite", server_dir / "workspace"
    with running_server(server_dir, "--db", str(db), "--workspace", str(workspace)) as base:
        yield base


@pytest.fixture
def hold(server_dir: Path) -> Hold:
    """The slow step holds from here until the test releases it (or ends)."""
    with Hold(server_dir) as held:
        yield held


def stream_until(base: str, thread: str, message: str, stop_at: str | None, seen: list) -> None:
    """Stream a run, recording what happened (kinds()); return (closing the connection) at
    `stop_at`, or when the stream ends."""
    body = run_body(message, if_not_exists="create")
    with httpx.stream("POST", f"{base}/threads/{thread}/runs/stream", json=body, timeout=60) as r:
        assert r.status_code == 200
        for event in sse_events(r.iter_lines()):
            [kind] = kinds([event])
            seen.append(kind)
            if kind == stop_at:
                return


def wait_for(seen: list, kind: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while kind not in seen:
        assert time.monotonic() < deadline, f"no {kind} event; saw {seen}"
        time.sleep(0.02)


def test_a_second_run_on_a_busy_thread_gets_409(server: str, hold: Hold):
    seen: list[str] = []
    first = threading.Thread(
        target=stream_until, args=(server, "busy", "do the slow step", None, seen)
    )
    first.start()
    wait_for(seen, "tool_call")
    second = post_run(server, "busy", "what is 2 plus 3", multitask_strategy="reject")
    assert second.status_code == 409
    assert second.json()["detail"].startswith("thread busy is running run ")
    rollback = httpx.post(f"{server}/threads/busy/rollback", json={"turns": 1}, timeout=10)
    assert rollback.status_code == 409
    hold.release()
    first.join(timeout=30)
    assert seen[-2:] == ["updates", "final"]
    again = post_run(server, "busy", "what is 2 plus 3")
    assert again.status_code == 200 and final_event(parse_sse(again.text))["status"] == "answered"


def test_an_enqueued_run_waits_for_the_one_before_it(server: str, hold: Hold):
    seen: list[str] = []
    first = threading.Thread(
        target=stream_until, args=(server, "queue", "do the slow step", None, seen)
    )
    first.start()
    wait_for(seen, "tool_call")
    queued = httpx.post(
        f"{server}/threads/queue/runs",
        json=run_body("what is 2 plus 3", multitask_strategy="enqueue"),
        timeout=10,
    ).json()
    assert queued["status"] == "pending"
    hold.release()
    joined = httpx.get(f"{server}/threads/queue/runs/{queued['run_id']}/join", timeout=30).json()
    first.join(timeout=30)
    assert [m["content"] for m in joined["messages"] if m["type"] == "human"] == [
        "do the slow step",
        "what is 2 plus 3",
    ]


def test_a_client_that_disconnects_mid_stream_leaves_the_thread_consistent(server: str, hold: Hold):
    seen: list[str] = []
    stream_until(server, "gone", "do the slow step", "tool_call", seen)
    assert "final" not in seen  # the connection closed while the tool was still running
    hold.release()

    deadline = time.monotonic() + 30
    while (after := post_run(server, "gone", "what is 2 plus 3")).status_code == 409:
        assert time.monotonic() < deadline, "the detached run never released the thread"
        time.sleep(0.1)
    assert after.status_code == 200 and final_event(parse_sse(after.text))["status"] == "answered"

    history = httpx.get(f"{server}/threads/gone/timeline", timeout=10).json()
    turns = {t["turn"]: t for t in reversed(history["turns"])}
    assert turns[1]["status"] == "answered" and turns[1]["tools"] == ["slow_step"]
    assert turns[2]["status"] == "answered"
    messages = httpx.get(f"{server}/threads/gone", timeout=10).json()["values"]["messages"]
    called = {c["id"] for m in messages for c in m.get("tool_calls", [])}
    answered = {m["tool_call_id"] for m in messages if m["type"] == "tool"}
    assert called == answered  # no dangling tool calls
    assert next(m["content"] for m in messages if m["type"] == "ai" and m["content"]) == "all done"


def response_head(base: str, request: bytes) -> bytes:
    """Send raw bytes to the server; what it answers up to the end of the response headers."""
    address = urlsplit(base)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        while b"\r\n\r\n" not in reply and (chunk := sock.recv(65536)):
            reply += chunk
    return reply


def test_the_server_refuses_a_request_for_another_host_name(server: str):
    rebound = httpx.get(f"{server}/threads/x", headers={"host": "attacker.example"}, timeout=10)
    assert rebound.status_code == 400 and "--allowed-host" in rebound.json()["detail"]


def test_the_server_refuses_a_50_mb_body_without_reading_it(server: str):
    head = (
        f"POST /threads HTTP/1.1\r\nHost: {urlsplit(server).netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {50 * 1024 * 1024}\r\n\r\n"
    )
    # Not a byte of the body is sent: the answer must come from the headers alone.
    assert response_head(server, head.encode()).startswith(b"HTTP/1.1 413 ")


def test_serve_requires_the_token_from_app_api_token(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("APP_API_TOKEN", "tok-1")
    args = ("--db", str(tmp_path / "agent.sqlite"), "--workspace", str(tmp_path / "workspace"))
    with running_server(tmp_path, *args) as base:
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200
        search = f"{base}/threads/search"
        assert httpx.post(search, json={}, timeout=10).status_code == 401
        authorized = {"Authorization": "Bearer tok-1"}
        assert httpx.post(search, json={}, headers=authorized, timeout=10).status_code == 200


def test_a_cancelled_run_stops_after_its_step_and_leaves_the_thread_consistent(
    server: str, hold: Hold
):
    assert httpx.post(f"{server}/threads/stop/runs/nope/cancel", timeout=10).status_code == 404
    events: list[tuple[str, dict]] = []

    def slow_run() -> None:
        body = run_body("do the slow step", if_not_exists="create")
        with httpx.stream("POST", f"{server}/threads/stop/runs/stream", json=body, timeout=60) as r:
            events.extend(sse_events(r.iter_lines()))

    first = threading.Thread(target=slow_run)
    first.start()
    deadline = time.monotonic() + 20
    while "tool_call" not in kinds(events):
        assert time.monotonic() < deadline, f"no tool_call event; saw {events}"
        time.sleep(0.02)
    run_id = events[0][1]["run_id"]
    # the SDKs' cancel: no body, no content type
    cancelled = httpx.post(f"{server}/threads/stop/runs/{run_id}/cancel", timeout=10)
    assert cancelled.status_code == 202 and cancelled.json()["run_id"] == run_id
    hold.release()
    first.join(timeout=30)

    assert final_event(events) is None
    assert any("cancelled" in d.get("text", "") for k, d in events if k == "custom")
    run = httpx.get(f"{server}/threads/stop/runs/{run_id}", timeout=10).json()
    assert run["status"] == "interrupted"
    messages = httpx.get(f"{server}/threads/stop", timeout=10).json()["values"]["messages"]
    called = {c["id"] for m in messages for c in m.get("tool_calls", [])}
    answered = {m["tool_call_id"] for m in messages if m["type"] == "tool"}
    assert called == answered  # the open call was closed, not left dangling
    history = httpx.get(f"{server}/threads/stop/timeline", timeout=10).json()
    assert [t["status"] for t in history["turns"]] == ["cancelled"]

    after = post_run(server, "stop", "what is 2 plus 3")
    assert after.status_code == 200 and final_event(parse_sse(after.text))["status"] == "answered"
