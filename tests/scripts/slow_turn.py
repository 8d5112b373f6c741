"""Run one turn whose tool blocks until killed: used to kill -9 a process in the middle of a turn."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from langchain_core.tools import tool

from app.chat import ChatSession, make_context
from app.config import load_settings
from app.render import JsonlRenderer
from app.store import open_checkpointer
from rich.console import Console
from tests.fakes import ScriptedChatModel, ai_calls, call

thread_id, started_marker, seconds = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])


@tool
def slow_step(label: str) -> str:
    """Take a long time (test helper)."""
    started_marker.write_text(str(time.time()))
    time.sleep(seconds)
    return f"finished {label}"


settings = load_settings()
model = ScriptedChatModel(script=[ai_calls(call("slow_step", {"label": "A"}, "slow-1")), "all done"])
with open_checkpointer(settings.db) as saver:
    context = make_context(settings, model)
    context = dataclasses.replace(context, tools=[slow_step])
    session = ChatSession(settings, saver, thread_id, context)
    result = session.run_turn("please run the slow step", JsonlRenderer(Console()))
    print("RESULT", result.status, result.answer)
