"""The type each field of a loaded state must have. A tampered checkpoint that decodes (the saver
refuses what does not, app/db/strict.py) can still hold values of the wrong type, and nodes and
renderers rely on these. No LangChain here: `history` checks a stored head with it as data."""

from __future__ import annotations

from collections.abc import Callable

NUMBER = (int, float)
# The type of every field of AgentState and of the strategies' states (graphs/plan/state.py,
# graphs/reflexion/state.py, graphs/routed/state.py) a loaded state may hold.
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "turn": int,
    "iteration": int,
    "retry_count": int,
    "tokens_used": int,
    "turn_started_at": NUMBER,
    "status": (str, type(None)),
    "budget_exhausted": (str, type(None)),
    "last_error": (dict, type(None)),
    "call_signatures": list,
    "strategy": str,
    "plan": (list, type(None)),
    "step_results": list,
    "replans": int,
    "plan_continues": bool,
    "trial": int,
    "lessons": list,
    "verdict": (dict, type(None)),
    "route": (dict, type(None)),
    "turn_message_id": (str, type(None)),
}


def unreadable_reason(values: object, is_message: Callable[[object], bool]) -> str | None:
    """Why a loaded state cannot be trusted, if it cannot: `is_message` says what a message is
    (a built message, or a stored one)."""
    if not isinstance(values, dict):
        return "it is not a state"
    messages = values.get("messages", [])
    if not isinstance(messages, list) or not all(is_message(m) for m in messages):
        return "its messages are not messages"
    for key, kind in FIELD_TYPES.items():
        if key in values and not isinstance(values[key], kind):
            return f"its {key} is a {type(values[key]).__name__}"
    return None
