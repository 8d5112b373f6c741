"""The reflexion strategy's routers. A failed evaluation is retried by the shared rule; when it
cannot be, the attempt's answer stands (the turn ends) rather than a failure replacing it."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from graphs.reflexion.state import ReflexionState
from graphs.shared.live import context_of
from graphs.shared.recovery import retry_or_fail
from graphs.state import END, AgentContext


def route_after_attempt(state: ReflexionState) -> Literal["evaluate", "__end__"]:
    """Only an answered attempt is judged; a failed, cancelled or out-of-budget one ends the turn."""
    if state.get("status") in {"failed", "cancelled"} or state.get("budget_exhausted"):
        return END
    return "evaluate"


def route_after_evaluate(
    state: ReflexionState, runtime: Runtime[AgentContext]
) -> Literal["reflect", "retry", "finalize", "__end__"]:
    if state.get("last_error"):
        return "retry" if retry_or_fail(state, runtime) == "retry" else END
    verdict = state.get("verdict") or {"success": True}
    if verdict["success"] or state.get("trial", 0) >= context_of(runtime).max_trials:
        return END
    # Another trial would start with the turn's budget already spent: one last answer instead.
    return "finalize" if state.get("budget_exhausted") else "reflect"
