"""How a turn really ended: `answered` only when what was asked was done. The graph says `answered`
whenever the model answered; an answer that reports a failed action is the turn failing politely, and
the exit status, `history` and the final event say `failed`. One rule (`is_success`) decides success
everywhere: only an `answered` turn succeeded; a failed or stopped one did not.

The rule is written once over plain data (the model steps' call ids, the tool results), so `history`
applies it to stored messages without loading LangChain (app/service/history.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from langchain_core.messages import AnyMessage, ToolMessage


ANSWERED = "answered"
# Turns the agent stopped before the request was answered, with what stopped them (the words the
# one-shot's error line uses).
STOPPED = {
    "budget_exhausted": "the time or token budget ran out",
    "max_iterations": "the step limit was reached",
    "loop_detected": "it repeated the same tool call",
}


def is_success(status: str) -> bool:
    """The one rule of the exit status, the API's run outcome and `history`: a turn succeeded only
    when it answered what was asked. Failed turns (retries used up, an action not done) and
    stopped ones (a budget spent, the step limit, a loop) did not, whatever they said."""
    return status == ANSWERED


def unanswered_reason(status: str) -> str:
    """Why a turn that did not succeed ended, in words for one error line."""
    if status in STOPPED:
        return f"stopped before answering: {STOPPED[status]} ({status})"
    return status


class ToolResult(NamedTuple):
    """What a tool message says about its call."""

    call_id: str
    name: str
    failed: bool


def turn_status(values: dict) -> str:
    """The status of the turn that ends at a state with these values."""
    from graphs.shared.messages import current_turn

    return settled_status(
        values, lambda: bool(unrecovered_failures(current_turn(values.get("messages", []))))
    )


def settled_status(values: dict, has_unrecovered_failures: Callable[[], bool]) -> str:
    """The turn's status from its values, asking about its tool calls only when that decides it."""
    status = values.get("status") or ANSWERED
    if status != ANSWERED:
        return status
    verdict = values.get("verdict")
    if verdict is not None:  # reflexion: the last evaluation judged the last attempt
        return "answered" if verdict.get("success") else "failed"
    if values.get("step_results"):  # plan: a step that failed or was skipped was not done
        done = all(r.get("status") == "success" for r in values["step_results"])
        return "answered" if done else "failed"
    return "failed" if has_unrecovered_failures() else "answered"


def unrecovered_failures(turn: Sequence[AnyMessage]) -> list[ToolMessage]:
    """The turn's failed tool messages that no later step made good (`unrecovered`)."""
    from langchain_core.messages import AIMessage, ToolMessage

    steps = [[call["id"] or "" for call in m.tool_calls] for m in turn if isinstance(m, AIMessage)]
    messages = [m for m in turn if isinstance(m, ToolMessage)]
    results = [ToolResult(m.tool_call_id, m.name or "", m.status == "error") for m in messages]
    return [messages[i] for i in unrecovered(steps, results)]


def unrecovered(steps: Sequence[Sequence[str]], results: Sequence[ToolResult]) -> list[int]:
    """The positions of the failed results (refused ones included) that no later step made good: a
    call of the same tool that succeeded in a later model step. `steps` are the call ids of each
    model step in order. Calls of one step run side by side, so one of them succeeding does not
    make good another that failed ("Paris and Atlantis")."""
    step_of = {call_id: step for step, calls in enumerate(steps) for call_id in calls}
    last_success: dict[str, int] = {}
    for result in results:
        if not result.failed:
            step = step_of.get(result.call_id, -1)
            last_success[result.name] = max(step, last_success.get(result.name, -1))
    return [
        position
        for position, result in enumerate(results)
        if result.failed and last_success.get(result.name, -1) <= step_of.get(result.call_id, -1)
    ]
