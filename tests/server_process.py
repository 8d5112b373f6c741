"""`python -m app serve` in a real subprocess on 127.0.0.1 (a free port), for HTTP and browser tests."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
SLOW_SERVER = REPO / "tests" / "scripts" / "slow_server.py"


class Hold:
    """Holds the server's "slow step" tool while on: a test turns it on before a slow run and off
    once it has seen what must happen while the run is busy (never a sleep)."""

    def __init__(self, tmp: Path) -> None:
        self.path = tmp / "slow-step.hold"

    def __enter__(self) -> Hold:
        self.path.touch()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


@contextlib.contextmanager
def running_server(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A server whose "slow step" tool holds while `Hold(tmp)` is on; yields its base URL. `env`:
    settings of its own, besides the test's environment."""
    command = [sys.executable, str(SLOW_SERVER), str(Hold(tmp).path), "--port", "0", *args]
    with _serving(command, tmp / "server.log", env or {}) as (_, base):
        yield base


@contextlib.contextmanager
def plain_server(tmp: Path, *args: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """`python -m app serve` as configured by the environment; yields the process (a test may
    kill it) and its base URL. Its output goes to tmp/server.log."""
    command = [sys.executable, "-m", "app", "serve", "--port", "0", *args]
    with _serving(command, tmp / "server.log", {}) as started:
        yield started


@contextlib.contextmanager
def _serving(
    command: list[str], log: Path, extra: dict[str, str]
) -> Iterator[tuple[subprocess.Popen, str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", **extra}
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield process, _wait_for_url(process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_url(process: subprocess.Popen, log: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the server did not start:\n{log.read_text()}")


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict]]:
    """(type, data) of each Server-Sent Event in a stream of text lines."""
    kind, data = "message", []
    for line in lines:
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield kind, json.loads("\n".join(data))
            kind, data = "message", []


def parse_sse(text: str) -> list[tuple[str, dict]]:
    return list(sse_events(iter([*text.split("\n"), ""])))


def run_body(message: str, **extra: object) -> dict:
    """A streamed run of the tool loop on `message`, with Waypoint's own events (custom mode)."""
    return {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": message}]},
        "stream_mode": ["custom", "updates"],
        "final_event": True,
        **extra,
    }


def post_run(base: str, thread: str, message: str, **extra: object) -> httpx.Response:
    return httpx.post(
        f"{base}/threads/{thread}/runs/stream", json=run_body(message, **extra), timeout=60
    )


def kinds(events: list[tuple[str, dict]]) -> list[str]:
    """What happened, in order: Waypoint's events by type, other stream parts by their mode."""
    return [data["type"] if kind == "custom" else kind for kind, data in events]


def final_event(events: list[tuple[str, dict]]) -> dict | None:
    return next((d for k, d in events if k == "custom" and d["type"] == "final"), None)
