"""Recovery from a failed step, one rule for every strategy, and the retry node.

A context overflow is summarised while the retry budget lasts and there is something to summarise; a
tool error (the model reads it and tries again) or a transient model error is retried while the budget
lasts, unless the endpoint asks to wait longer than Waypoint waits; anything else ends the turn in the
failure handler.
"""

from __future__ import annotations

import random
from typing import Literal

from langgraph.runtime import Runtime

from graphs.shared.deadline import turn_seconds_left
from graphs.shared.live import context_of
from graphs.shared.summarize import can_summarize
from graphs.state import AgentContext, AgentState, LastError


def recover(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["retry", "summarize", "failure_handler"]:
    """Where a model step that recorded `last_error` goes next."""
    error = recorded_error(state)
    if error["kind"] == "context_overflow":
        fits = _budget_left(state, runtime) and can_summarize(state, context_of(runtime))
        return "summarize" if fits else "failure_handler"
    return retry_or_fail(state, runtime)


def finalize_or_recover(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["finalize", "retry", "summarize", "failure_handler"]:
    """`recover`, except that a transient model failure once the turn's budget is spent ends the
    turn in `finalize` (status budget_exhausted): a stalled endpoint cut off by `--max-seconds`
    would only be asked again past the budget."""
    error = recorded_error(state)
    stalled = error["kind"] == "model_transient" and retryable(error, runtime)
    if state.get("budget_exhausted") and stalled:
        return "finalize"
    return recover(state, runtime)


def retry_or_fail(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["retry", "failure_handler"]:
    """Where a failure that summarising cannot fix goes (a tool error; any error of a strategy that
    does not summarise)."""
    again = _budget_left(state, runtime) and retryable(recorded_error(state), runtime)
    return "retry" if again else "failure_handler"


def recorded_error(state: AgentState) -> LastError:
    """The failure these routes and nodes handle: they run only after a node recorded one."""
    error = state.get("last_error")
    if error is None:
        raise ValueError("no last_error recorded: recovery runs only after a failed step")
    return error


def _budget_left(state: AgentState, runtime: Runtime[AgentContext]) -> bool:
    return state.get("retry_count", 0) < context_of(runtime).max_retries


def retryable(error: LastError, runtime: Runtime[AgentContext]) -> bool:
    if error["kind"] == "tool":
        return True
    return error["kind"] == "model_transient" and not waits_too_long(error, runtime)


def waits_too_long(error: LastError, runtime: Runtime[AgentContext]) -> bool:
    """A Retry-After beyond the cap is not waited out: the turn fails and says when to retry."""
    retry_after = error.get("retry_after")
    return retry_after is not None and retry_after > context_of(runtime).max_retry_after


def retry(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Count one more consecutive failure, wait (model errors only) and hand back to the node that
    failed."""
    context = context_of(runtime)
    error = recorded_error(state)
    attempt = state.get("retry_count", 0) + 1
    wait = 0.0 if error["kind"] == "tool" else backoff_delay(attempt, error, context)
    left = turn_seconds_left(state, context)
    if left is not None:  # never wait past the turn's time budget
        wait = max(0.0, min(wait, left))
    runtime.stream_writer(
        {
            "type": "retry",
            "attempt": attempt,
            "max_attempts": context.max_retries,
            "wait": round(wait, 3),
            "kind": error["kind"],
            "reason": error["message"],
        }
    )
    if wait > 0:
        context.sleep(wait)
    return {"retry_count": attempt}


def backoff_delay(attempt: int, error: LastError, context: AgentContext) -> float:
    """Full-jitter exponential backoff, never shorter than the endpoint's Retry-After."""
    ceiling = min(context.backoff_cap, context.backoff_base * 2 ** (attempt - 1))
    delay = random.uniform(0, ceiling)
    retry_after = error.get("retry_after")
    if retry_after is not None:
        delay = max(delay, float(retry_after))
    return delay
