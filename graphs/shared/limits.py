"""The per-turn limits every strategy checks: the time and token budgets, and loop detection."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from graphs.shared.deadline import seconds_left
from graphs.shared.messages import call_signature
from graphs.state import AgentContext, AgentState, Budget

LOOP_THRESHOLD = 3  # the same call a third time in one turn is a loop


def exhausted_budget(state: AgentState, context: AgentContext, tokens_used: int) -> Budget | None:
    """Which per-turn budget (wall time, model tokens) is used up, if any. The time is up when the
    turn has lasted its `max_seconds`, or when the run's model deadline has passed: the run starts
    that clock when it starts, a little before its first node stamps the turn's start, so a model
    call that ran out of time must not look to the router like a failure worth a retry."""
    started = state.get("turn_started_at")
    limit = context.max_seconds
    if limit is not None and (
        (started is not None and context.clock() - started > limit) or _deadline_passed()
    ):
        return "time"
    if context.max_tokens_per_turn is not None and tokens_used > context.max_tokens_per_turn:
        return "tokens"
    return None


def _deadline_passed() -> bool:
    left = seconds_left()
    return left is not None and left <= 0


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
