"""`python -m app chat` whose one tool blocks for a while: lets tests kill or interrupt a real turn.

Usage: slow_turn.py THREAD STARTED_MARKER RELEASE_FILE [CLI ARGS…] — the marker file appears when
the tool starts, and the tool holds until the test creates RELEASE_FILE (or kills the process; five
minutes at most); without CLI ARGS it runs one `chat --jsonl` turn that asks for the slow step.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

from langchain_core.tools import tool

import app.service.context
from app.__main__ import main
from tests.fakes import ScriptedChatModel, ai_calls, call

thread_id, started_marker, release = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
HOLD_AT_MOST = 300.0


@tool
def slow_step(label: str) -> str:
    """Take a long time (test helper)."""
    started_marker.write_text(str(time.time()))
    deadline = time.monotonic() + HOLD_AT_MOST
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return f"finished {label}"


def slow_context(settings, model=None, **options):  # type: ignore[no-untyped-def]
    # A process that resumes the killed turn only needs the final answer.
    first = (
        []
        if os.environ.get("SLOW_TURN_RESUME")
        else [ai_calls(call("slow_step", {"label": "A"}, "slow-1"))]
    )
    script = [*first, "all done"]
    context = real_make_context(settings, ScriptedChatModel(script=script), **options)
    return dataclasses.replace(context, tools=[slow_step])


real_make_context = app.service.context.make_context
app.service.context.make_context = slow_context
cli_args = sys.argv[4:] or ["chat", "--jsonl", "-t", thread_id, "-m", "please run the slow step"]
sys.argv = ["app", *cli_args]
main()
