"""The per-turn cost of recording side-effecting tool calls (docs/notes/once.md): react turns with one
write_file call (recorded) and with one calculator call (read-only), recording on and off in alternate
turns, on Waypoint's SQLite saver, or on a throwaway PostgreSQL with `pg`.

Usage: python tests/scripts/time_recorded_calls.py [pg] [async] [TURNS] — `async`: durability
"async" (the engines' default) instead of Waypoint's "sync".
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from langchain_core.messages import HumanMessage

import graphs.shared.tool_calls as tool_calls
from app.store import open_checkpointer
from graphs.react.graph import build_graph
from graphs.state import AgentContext
from tests.fakes import ScriptedChatModel, ai_calls, call
from tools import default_tools

WARM_UP = 20
CALLS = {
    "write_file": {"path": "a.txt", "content": "x" * 200},
    "calculator": {"expression": "2+3"},
}


def one_turn(graph, tools, thread: str, turn: int, name: str, durability: str) -> float:  # type: ignore[no-untyped-def]
    model = ScriptedChatModel(script=[ai_calls(call(name, CALLS[name], f"c{turn}")), "ok"])
    context = AgentContext(model=model, tools=tools, system_prompt="x", approval="auto")
    started = time.perf_counter()
    turn_input = {"messages": [HumanMessage("go", id=f"h{turn}")], "turn": turn}
    config = {"configurable": {"thread_id": thread}}
    for _ in graph.stream(turn_input, config, context=context, durability=durability):
        pass
    return time.perf_counter() - started


def main() -> None:
    on_postgres = "pg" in sys.argv[1:]
    durability = "async" if "async" in sys.argv[1:] else "sync"
    turns = int(next((a for a in sys.argv[1:] if a.isdigit()), "200"))
    root = Path(tempfile.mkdtemp())
    tools = default_tools(root / "workspace")
    recording = tool_calls.recording
    with contextlib.ExitStack() as stack:
        if on_postgres:
            from tests.pg_server import session_server

            db: str | Path = stack.enter_context(session_server()).new_database()
        else:
            db = root / "agent.sqlite"
        graph = build_graph(stack.enter_context(open_checkpointer(db)))
        for name in CALLS:
            times: dict[str, list[float]] = {"on": [], "off": []}
            for turn in range(1, turns + 1):
                for mode in times:
                    tool_calls.recording = recording if mode == "on" else (lambda: False)
                    times[mode].append(
                        one_turn(graph, tools, f"{name}-{mode}", turn, name, durability)
                    )
            on, off = times["on"][WARM_UP:], times["off"][WARM_UP:]
            paired = statistics.median(a - b for a, b in zip(on, off, strict=True))
            print(
                f"{name}: recording off {statistics.median(off) * 1000:.1f} ms, "
                f"on {statistics.median(on) * 1000:.1f} ms, paired median difference "
                f"{paired * 1000:+.1f} ms per turn (n={len(on)})"
            )


main()
