"""Clients waiting for their runs (`runs/wait`) hold no worker thread of the server's event loop:
however many wait, another run still starts at once."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx

from tests.server_process import Hold, running_server

# asyncio's default executor: min(32, cores + 4) threads; one more waiting client than that
WAITING = min(32, (os.cpu_count() or 1) + 4) + 1


def wait_body(text: str) -> dict:
    return {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": text}]},
        "if_not_exists": "create",
    }


def until_running(base: str, threads: list[str]) -> None:
    """Until every thread's run is running (each held in the slow step), or fail."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        statuses = [
            [run["status"] for run in httpx.get(f"{base}/threads/{t}/runs", timeout=30).json()]
            for t in threads
        ]
        if all(found == ["running"] for found in statuses):
            return
        time.sleep(0.05)
    raise AssertionError(f"not every run started: {statuses}")


def test_clients_waiting_for_held_runs_do_not_hold_up_another_run(tmp_path: Path):
    threads = [f"w{n}" for n in range(WAITING)]
    answers: dict[str, int] = {}

    def wait(thread: str) -> None:
        answer = httpx.post(
            f"{base}/threads/{thread}/runs/wait", json=wait_body("do the slow step"), timeout=300
        )
        answers[thread] = answer.status_code

    with Hold(tmp_path) as hold, running_server(tmp_path) as base:
        clients = [threading.Thread(target=wait, args=(t,)) for t in threads]
        for client in clients:
            client.start()
        until_running(base, threads)
        other = httpx.post(
            f"{base}/threads/other/runs", json=wait_body("what is 2 plus 3"), timeout=60
        )
        assert other.status_code == 200, other.text
        hold.release()
        for client in clients:
            client.join(timeout=300)
    assert answers == {thread: 200 for thread in threads}
