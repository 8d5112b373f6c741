"""The tool loop's routers: pure functions of the state (and the run's limits) that return the next
node's name. Failures go through the shared recovery rule (graphs/shared/recovery.py)."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from graphs.shared.limits import is_looping
from graphs.shared.live import context_of
from graphs.shared.recovery import finalize_or_recover, retry_or_fail
from graphs.shared.summarize import needs_summary
from graphs.state import END, AgentContext, AgentState


def route_at_start(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["summarize", "agent"]:
    """A turn whose input would overflow the context budget first summarises older turns."""
    return "summarize" if needs_summary(state, context_of(runtime)) else "agent"


def route_after_agent(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["tools", "retry", "summarize", "failure_handler", "finalize", "__end__"]:
    if state.get("last_error"):
        return finalize_or_recover(state, runtime)
    reply = state["messages"][-1]
    if not isinstance(reply, AIMessage) or not (reply.tool_calls or reply.invalid_tool_calls):
        return END
    if is_looping(state) or state.get("budget_exhausted"):
        return "finalize"
    return "tools"


def route_after_tools(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["agent", "retry", "failure_handler", "finalize"]:
    # Budget before errors: retry_count alone does not bound a turn (a model success after a model
    # error resets it), so alternating model and tool failures would loop to the recursion limit.
    if state.get("iteration", 0) >= context_of(runtime).max_iterations or state.get(
        "budget_exhausted"
    ):
        return "finalize"
    if state.get("last_error"):
        return retry_or_fail(state, runtime)
    return "agent"
