"""A run the one-writer rule refused (graphs/shared/guard.py) after another run had started from its
answer: the turn is answered on the thread, so the run ends as answered. ThreadChangedError would
tell its client to send the message again, and the thread would answer that message twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from graphs.shared.guard_rows import ThreadChangedError
from graphs.shared.messages import is_notice


def carried_on(turn: StateSnapshot, head: StateSnapshot) -> bool:
    """Whether the head holds the refused run's turn (`turn`: the checkpoint its refused step
    followed), answered. Not when that is the run's input checkpoint: its question is still in the
    checkpoint's pending writes, which a run starting from it drops, and the messages stored there
    end with the thread's previous turn, answered."""
    if (turn.metadata or {}).get("source") == "input":
        return False
    return answered_on_thread(messages_of(turn.values), messages_of(head.values))


def answered_on_thread(turn: Sequence[AnyMessage], head: Sequence[AnyMessage]) -> bool:
    """Whether the thread's messages now (`head`) hold the turn the refused step was in (its
    messages, `turn`): the turn's question, then an answer (a model's reply that calls no tool,
    not Waypoint's notice of a failure or a spent budget) before any later question."""
    question = next((m.id for m in reversed(turn) if m.type == "human"), None)
    ids = [m.id for m in head]
    if question is None or question not in ids:
        return False
    for message in head[ids.index(question) + 1 :]:
        if message.type == "human":
            return False
        if _is_answer(message):
            return True
    return False


def turn_config(refused: ThreadChangedError, run: RunnableConfig | None) -> RunnableConfig | None:
    """Where the refused run's turn was when it was refused; None when it cannot have been carried
    on: refused before it stored its turn, or a run started from a checkpoint (a replay or a fork:
    the head may answer the same question, but that is the original turn, not this branch)."""
    started_at = ((run or {}).get("configurable") or {}).get("checkpoint_id")
    if refused.turn_checkpoint is None or started_at:
        return None
    return _thread(refused.thread_id, refused.turn_checkpoint)


def head_config(refused: ThreadChangedError) -> RunnableConfig:
    """The refused run's thread, at its head."""
    return _thread(refused.thread_id, None)


def messages_of(values: Any) -> list[AnyMessage]:
    """A state's messages (none for a checkpoint that was never stored)."""
    messages = values.get("messages") if isinstance(values, dict) else None
    return list(messages or [])


def _is_answer(message: AnyMessage) -> bool:
    return (
        isinstance(message, AIMessage)
        and not message.tool_calls
        and not message.invalid_tool_calls
        and not is_notice(message)
    )


def _thread(thread_id: str, checkpoint_id: str | None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}
