"""How a turn really ended: `answered` only when what was asked was done. The graph says `answered`
whenever the model answered; an answer that reports a failed action is the turn failing politely, and
the exit status, `history` and the final event say `failed`."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from graphs.shared.messages import current_turn


def turn_status(values: dict) -> str:
    """The status of the turn that ends at a state with these values."""
    status = values.get("status") or "answered"
    if status != "answered":
        return status
    verdict = values.get("verdict")
    if verdict is not None:  # reflexion: the last evaluation judged the last attempt
        return "answered" if verdict.get("success") else "failed"
    if values.get("step_results"):  # plan: a step that failed or was skipped was not done
        done = all(r.get("status") == "success" for r in values["step_results"])
        return "answered" if done else "failed"
    failed = unrecovered_failures(current_turn(values.get("messages", [])))
    return "failed" if failed else "answered"


def unrecovered_failures(turn: Sequence[AnyMessage]) -> list[ToolMessage]:
    """The turn's failed tool calls (refused ones included) that no later step made good: a call
    of the same tool that succeeded in a later model step. Calls of one step run side by side, so
    one of them succeeding does not make good another that failed ("Paris and Atlantis")."""
    step_of: dict[str, int] = {}
    for step, message in enumerate(m for m in turn if isinstance(m, AIMessage)):
        for call in message.tool_calls:
            step_of[call["id"] or ""] = step
    results = [m for m in turn if isinstance(m, ToolMessage)]
    last_success: dict[str, int] = {}
    for result in results:
        if result.status != "error":
            step = step_of.get(result.tool_call_id, -1)
            last_success[result.name or ""] = max(step, last_success.get(result.name or "", -1))
    return [
        result
        for result in results
        if result.status == "error"
        and last_success.get(result.name or "", -1) <= step_of.get(result.tool_call_id, -1)
    ]
