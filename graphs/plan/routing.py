"""The plan strategy's routers; a failed planner or synthesizer goes through the shared recovery."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from graphs.plan.state import PlanState, continues, needs_replan, steps_left
from graphs.shared.live import context_of
from graphs.shared.recovery import finalize_or_recover
from graphs.shared.summarize import needs_summary
from graphs.state import END, AgentContext


def route_at_plan_start(
    state: PlanState, runtime: Runtime[AgentContext]
) -> Literal["summarize", "planner"]:
    """As in the tool loop: a turn over the context budget first summarises older turns."""
    return "summarize" if needs_summary(state, context_of(runtime)) else "planner"


def route_after_planner(
    state: PlanState, runtime: Runtime[AgentContext]
) -> Literal["executor", "synthesizer", "retry", "summarize", "failure_handler", "finalize"]:
    if state.get("last_error"):
        return finalize_or_recover(state, runtime)
    return "executor" if steps_left(state) else "synthesizer"


def route_after_executor(
    state: PlanState,
) -> Literal["executor", "planner", "synthesizer", "finalize"]:
    if state.get("budget_exhausted"):
        return "finalize"
    if needs_replan(state) or continues(state):
        return "planner"
    return "executor" if steps_left(state) else "synthesizer"


def route_after_synthesizer(
    state: PlanState, runtime: Runtime[AgentContext]
) -> Literal["retry", "summarize", "failure_handler", "finalize", "__end__"]:
    return finalize_or_recover(state, runtime) if state.get("last_error") else END


def route_after_retry(state: PlanState) -> Literal["planner", "synthesizer"]:
    """Back to the node that failed: the planner until a plan stands, else the synthesizer."""
    if state.get("plan") is None or needs_replan(state) or continues(state):
        return "planner"
    return "synthesizer"
