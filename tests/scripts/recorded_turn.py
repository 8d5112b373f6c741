"""`python -m app` with a scripted model and a tool with side effects that counts its calls: lets
tests kill a turn after the tool's result was recorded (WAYPOINT_TEST_HOLD_AFTER_RECORD) and resume it.

Usage: recorded_turn.py SCENARIO COUNT_FILE CLI ARGS… — SCENARIO names the model's script (below);
with RECORDED_TURN_RESUME set, the model gets only what the resumed turn still asks of it.
`append_line` appends its text to COUNT_FILE (side effects; `append_risky` too, after approval);
`count_lines` reads it (read-only).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from langchain_core.tools import tool

import app.service.context
from app.__main__ import main
from graphs.plan.state import Plan, PlanStep
from graphs.reflexion.state import Verdict
from graphs.routed.state import Route
from tests.fakes import ScriptedChatModel, ai_calls, call

scenario, count_file = sys.argv[1], Path(sys.argv[2])


@tool
def append_line(text: str) -> str:
    """Append a line to the test's file (test helper with side effects)."""
    with open(count_file, "a", encoding="utf-8") as handle:
        handle.write(text + "\n")
    return f"appended {text}"


@tool
def count_lines() -> str:
    """How many lines the test's file has (read-only test helper)."""
    lines = count_file.read_text(encoding="utf-8").splitlines() if count_file.exists() else []
    return f"{len(lines)} lines"


@tool
def append_risky(text: str) -> str:
    """Append a line to the test's file, after approval (test helper with side effects)."""
    return append_line.invoke({"text": text})


append_line.metadata = {"side_effects": True}
append_risky.metadata = {"side_effects": True, "risk": lambda args: "appends a line"}

ONE = ai_calls(call("append_line", {"text": "one"}, "once-1"))
PARALLEL = ai_calls(
    call("append_line", {"text": "first"}, "once-1"),
    call("count_lines", {}, "once-2"),
    call("append_line", {"text": "second"}, "once-3"),
)
MISMATCH = ai_calls(
    call("append_risky", {"text": "first"}, "once-1"),
    call("append_line", {"text": "second"}, "once-3"),
)
VERDICT = Verdict(success=True, reason="it was done")
# (what the killed run asks of the model, what the resumed run still asks)
SCRIPTS = {
    "one": ([ONE], ["all done"]),
    "parallel": ([PARALLEL], ["all done"]),
    "plan": ([Plan(steps=[PlanStep(tool="append_line", arguments={"text": "one"})])], ["done"]),
    "reflexion": ([ONE], ["all done", VERDICT]),
    "mismatch": ([MISMATCH], ["all done"]),
    "routed": ([Route(path="tools"), ONE], ["all done"]),
}


def scripted_context(settings, model=None, **options):  # type: ignore[no-untyped-def]
    killed, resumed = SCRIPTS[scenario]
    script = list(resumed if os.environ.get("RECORDED_TURN_RESUME") else [*killed, *resumed])
    context = real_make_context(settings, ScriptedChatModel(script=script), **options)
    return dataclasses.replace(context, tools=[append_line, append_risky, count_lines])


real_make_context = app.service.context.make_context
app.service.context.make_context = scripted_context
sys.argv = ["app", *sys.argv[3:]]
main()
