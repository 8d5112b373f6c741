"""What the one-writer guard (graphs/shared/guard.py) costs a turn: 60 sequential react turns on one
thread (offline model), on SQLite and on a throwaway PostgreSQL; the guard's own time is the time in
the node checks plus the guarded `put` less the saver's own `put`.
Run: python -m tests.scripts.guard_cost"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from langchain_core.messages import HumanMessage

import graphs.shared.guard as guard
from app.config import load_settings
from app.service.context import make_context
from app.store import open_checkpointer
from graphs.strategies import STRATEGIES
from tests.pg_server import session_server

TURNS = 60


def timed(function: Any, total: dict, key: str) -> Any:
    def run(*args: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args)
        finally:
            total[key] += time.perf_counter() - started

    return run


def measure(db: str, name: str) -> None:
    context = make_context(load_settings())
    total = {"check": 0.0, "guarded": 0.0, "inner": 0.0}
    real_check = guard.check_thread
    guard.check_thread = timed(real_check, total, "check")
    try:
        with open_checkpointer(db) as saver:
            saver.put = timed(saver.put, total, "inner")  # the saver's own, before the guard's
            graph = STRATEGIES["react"].build(saver)
            config = {"configurable": {"thread_id": "t"}}
            ask = {"messages": [HumanMessage("what is 1 plus 1")]}
            graph.invoke(ask, config, context=context)  # installs the guard on the saver
            saver.put = timed(saver.put, total, "guarded")
            total.update(check=0.0, guarded=0.0, inner=0.0)
            started = time.perf_counter()
            for n in range(TURNS):
                ask = {"messages": [HumanMessage(f"what is {n} plus 1")]}
                graph.invoke(ask, config, context=context, durability="sync")
            turn = (time.perf_counter() - started) / TURNS
    finally:
        guard.check_thread = real_check
    checks, puts = total["check"] / TURNS, (total["guarded"] - total["inner"]) / TURNS
    print(
        f"{name:8} turn {turn * 1000:6.2f} ms; guard {(checks + puts) * 1000:5.2f} ms a turn "
        f"({(checks + puts) / turn:.1%}): node checks {checks * 1000:.2f} ms, "
        f"stored checkpoints {puts * 1000:.2f} ms"
    )


if __name__ == "__main__":
    measure(tempfile.mktemp(suffix=".sqlite"), "sqlite")
    with session_server() as server:
        measure(server.new_database(), "postgres")
