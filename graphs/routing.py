"""Routers: pure functions of the state (and the run's limits) that return the next node's name."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.graph import END
from langgraph.runtime import Runtime

from graphs.messages import call_signature
from graphs.state import AgentContext, AgentState, LastError
from graphs.summarize import can_summarize, over_budget

RETRYABLE_MODEL_ERRORS = {"model_transient"}
LOOP_THRESHOLD = 3  # the same call a third time in one turn is a loop


def route_at_start(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["summarize", "agent"]:
    """A turn whose input would overflow the context budget first summarises older turns."""
    context = runtime.context
    if over_budget(state["messages"], context) and can_summarize(state, context):
        return "summarize"
    return "agent"


def route_after_agent(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["tools", "retry", "summarize", "failure_handler", "finalize", "__end__"]:
    error = state.get("last_error")
    if error:
        if error["kind"] == "context_overflow":
            return _summarize_or_fail(state, runtime)
        retryable = error["kind"] in RETRYABLE_MODEL_ERRORS and not waits_too_long(error, runtime)
        if retryable and state.get("budget_exhausted"):
            return "finalize"  # e.g. a stalled endpoint cut off by the time budget
        return _retry_or_fail(state, runtime, retryable=retryable)
    reply = state["messages"][-1]
    if not isinstance(reply, AIMessage) or not (reply.tool_calls or reply.invalid_tool_calls):
        return END
    if is_looping(state) or state.get("budget_exhausted"):
        return "finalize"
    return "tools"


def waits_too_long(error: LastError, runtime: Runtime[AgentContext]) -> bool:
    """A Retry-After beyond the cap is not waited out: the turn fails and says when to retry."""
    retry_after = error.get("retry_after")
    return retry_after is not None and retry_after > runtime.context.max_retry_after


def _summarize_or_fail(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["summarize", "failure_handler"]:
    context = runtime.context
    if state.get("retry_count", 0) < context.max_retries and can_summarize(state, context):
        return "summarize"
    return "failure_handler"


def route_after_tools(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["agent", "retry", "failure_handler", "finalize"]:
    # Budget before errors: retry_count alone does not bound a turn (a model success after a model
    # error resets it), so alternating model and tool failures would loop to the recursion limit.
    if state.get("iteration", 0) >= runtime.context.max_iterations or state.get("budget_exhausted"):
        return "finalize"
    if state.get("last_error"):
        return _retry_or_fail(state, runtime, retryable=True)
    return "agent"


def _retry_or_fail(
    state: AgentState, runtime: Runtime[AgentContext], *, retryable: bool
) -> Literal["retry", "failure_handler"]:
    if retryable and state.get("retry_count", 0) < runtime.context.max_retries:
        return "retry"
    return "failure_handler"


def is_looping(state: AgentState) -> bool:
    """True when a proposed call was already made twice this turn with identical arguments."""
    reply = state["messages"][-1]
    if not isinstance(reply, AIMessage):
        return False
    seen = state.get("call_signatures") or []
    return any(
        seen.count(call_signature(c["name"], c["args"])) >= LOOP_THRESHOLD - 1
        for c in reply.tool_calls
    )
