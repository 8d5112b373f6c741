"""Requests and overflows per turn of a long ReAct thread, each turn a new `chat -m` process, against
a fake llama-cpp-python server on 127.0.0.1 that counts like its chatml-function-calling format
(the HTML-escaped prompt: ~1.5x Waypoint's estimate; tests/overflow_replies.chatml_escaped_tokens):

    PYTHONPATH=. python docs/notes/window_measure.py [TURNS] [--forget]

--forget drops the kept window before each turn (every process learns it again).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from tests import overflow_replies as servers
from tests.openai_server import text
from tests.test_window_kept import GARDEN

WINDOW = 4096
REPLY_TOKENS = 256
REPO = Path(__file__).resolve().parents[2]


def refusal(prompt: int, window: int) -> servers.Reply:
    return servers.llama_cpp_python_400(prompt, window, completion=REPLY_TOKENS)


def chat(workdir: Path, base_url: str, message: str) -> int:
    env = os.environ | {
        "PYTHONPATH": str(REPO),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "unused",
        "APP_DB": str(workdir / "agent.sqlite"),
        "APP_WORKSPACE": str(workdir / "workspace"),
        "APP_MODEL": "openai:smollm2",
        "APP_MAX_OUTPUT_TOKENS": str(REPLY_TOKENS),
    }
    command = [sys.executable, "-m", "app", "chat", "-t", "long", "--tool-protocol", "react"]
    done = subprocess.run([*command, "-m", message], env=env, capture_output=True, timeout=300)
    return done.returncode


def forget(db: Path) -> None:
    if db.exists():
        with sqlite3.connect(db) as connection:
            connection.execute("DROP TABLE IF EXISTS waypoint_windows")
        connection.close()


def measure(turns: int, drop_window: bool) -> dict:
    per_turn = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        servers.WindowedServer(
            WINDOW, refusal, count=servers.chatml_escaped_tokens, breaks_streams=True
        ) as server,
    ):
        workdir = Path(tmp)
        for turn in range(1, turns + 1):
            if drop_window:
                forget(workdir / "agent.sqlite")
            server.add(text(f"Thought: noted\nFinal Answer: Noted, part {turn}."))
            before = (len(server.completions), len(server.overflows))
            message = f"Here are my garden notes, part {turn}: {GARDEN * 3} Please remember them."
            code = chat(workdir, server.base_url, message)
            sent = len(server.completions) - before[0]
            per_turn.append(
                {"exit": code, "requests": sent, "overflows": len(server.overflows) - before[1]}
            )
    requests = sum(t["requests"] for t in per_turn)
    return {
        "turns": turns,
        "requests_per_turn": round(requests / turns, 2),
        "overflows": sum(t["overflows"] for t in per_turn),
        "turns_with_an_overflow": sum(1 for t in per_turn if t["overflows"]),
        "exit_codes": [t["exit"] for t in per_turn],
        "per_turn": [(t["requests"], t["overflows"]) for t in per_turn],
    }


if __name__ == "__main__":
    count = int(next((a for a in sys.argv[1:] if a.isdigit()), "12"))
    print(json.dumps(measure(count, "--forget" in sys.argv)))
