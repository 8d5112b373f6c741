"""How far past `--max-seconds` a turn runs against misbehaving endpoints, and when the server sees
the connection closed: `PYTHONPATH=. python docs/notes/budgets_measure.py` (the figures in budgets.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.openai_server import OpenAIServer, Reply, hang, pings, slow_text
from tests.test_wire_budgets import SLOW_ANSWER, timed_turn

ENDPOINTS = {
    "pings only": pings(120),
    "stalled": hang(120),
    "slow tokens": slow_text(SLOW_ANSWER, 0.05, 600),
}


def in_process(name: str, reply: Reply, budget: float) -> str:
    with OpenAIServer() as server:
        server.add(reply)
        values, elapsed = timed_turn(server, Path(tempfile.mkdtemp()), budget)
        waited = time.monotonic()
        seen = server.hung_up.wait(10)
        late = time.monotonic() - waited
    closed = f"closed {late:.2f} s after the turn" if seen else "never closed"
    return f"{name:12} {budget:4.0f} s  turn {elapsed:6.2f} s  (+{elapsed - budget:.2f})  {values['status']}, {closed}"


def whole_process(budget: float) -> str:
    """`python -m app chat -m --jsonl` as a user runs it, against a server that only pings: the
    turn's span (from the first line printed, before the turn starts, to the `final` event) and
    the whole process."""
    with OpenAIServer() as server, tempfile.TemporaryDirectory() as home:
        server.add(pings(120))
        env = os.environ | {
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "unused",
            "APP_DB": f"{home}/agent.sqlite",
        }
        command = [sys.executable, "-m", "app", "chat", "-t", "m", "--model", "openai:m"]
        command += ["--max-seconds", f"{budget:g}", "--jsonl", "-m", "hello"]
        started = time.monotonic()
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        seen = [time.monotonic() for _ in process.stdout]  # one instant per line printed
        code = process.wait(timeout=300)
        elapsed = time.monotonic() - started
        closed = server.hung_up.wait(10)
    turn = seen[-1] - seen[0]
    return (
        f"process      {budget:4.0f} s  turn {turn:6.2f} s  (+{turn - budget:.2f})  exit {code}, "
        f"whole process {elapsed:.2f} s, connection closed: {closed}"
    )


if __name__ == "__main__":
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    for name, reply in ENDPOINTS.items():
        for budget in (2.0, 10.0):
            print(in_process(name, reply, budget))
    print(whole_process(10.0))
