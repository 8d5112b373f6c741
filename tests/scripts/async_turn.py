"""A react turn run the way LangGraph servers and Aegra run graphs: `astream` with an async saver
(AsyncSqliteSaver, or AsyncPostgresSaver for a postgresql:// DB), durability "async" (their default),
with checkpoint saves that lag behind the run, as on a busy database.

Usage: async_turn.py DB COUNT_FILE STRATEGY run|resume — `run` starts a turn of STRATEGY (react or
reflexion), whose `append_line` call appends to COUNT_FILE (side effects); `resume` continues the
thread (input None), as an engine does with a run whose worker died. Prints the thread's messages as
JSON, one [type, content] a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from graphs.reflexion.state import Verdict
from graphs.state import AgentContext
from graphs.strategies import get_strategy, strategy_turn_input
from tests.fakes import ScriptedChatModel, ai_calls, call

db, count_file, strategy, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
CHECKPOINT_LAG = 0.3  # seconds


@tool
def append_line(text: str) -> str:
    """Append a line to the test's file (test helper with side effects)."""
    with open(count_file, "a", encoding="utf-8") as handle:
        handle.write(text + "\n")
    return f"appended {text}"


append_line.metadata = {"side_effects": True}


def async_saver() -> contextlib.AbstractAsyncContextManager:
    if db.startswith("postgresql://"):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as Saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as Saver

    class LaggingSaver(Saver):
        """A database whose checkpoint writes lag behind the run: in durability "async" the step
        after a checkpoint then starts (and its tools run) before that checkpoint is saved."""

        async def aput(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if mode == "run":
                await asyncio.sleep(CHECKPOINT_LAG)
            return await super().aput(*args, **kwargs)

    return LaggingSaver.from_conn_string(db)


async def main() -> None:
    async with async_saver() as saver:
        if hasattr(saver, "setup"):
            await saver.setup()
        graph = get_strategy(strategy).build(saver)
        first = (
            [] if mode == "resume" else [ai_calls(call("append_line", {"text": "one"}, "once-1"))]
        )
        verdict = [Verdict(success=True, reason="done")] if strategy == "reflexion" else []
        model = ScriptedChatModel(script=[*first, "all done", *verdict])
        context = AgentContext(model=model, tools=[append_line], system_prompt="You are Waypoint.")
        config = {"configurable": {"thread_id": "T"}}
        message = HumanMessage("append a line", id="human-1")
        turn = strategy_turn_input(get_strategy(strategy), message, 1)
        async for _ in graph.astream(None if mode == "resume" else turn, config, context=context):
            pass
        state = await graph.aget_state(config)
        for message in state.values["messages"]:
            print(json.dumps([message.type, message.content]))


asyncio.run(main())
