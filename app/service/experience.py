"""Experience memory around a turn: the few most relevant past experiences go with the user's
message (turn notes), and each finished turn is recorded, with its reflexion lessons; both in the
store the turn's graph runs with."""

from __future__ import annotations

import dataclasses

from langgraph.store.base import BaseStore
from langgraph.types import StateSnapshot

from app.service.lessons import record_lessons
from app.service.memory import (
    experience_prompt,
    record_experience,
    relevant_notes,
    tools_used_in_turn,
)
from app.service.run import TurnResult
from graphs.state import AgentContext
from tools.memory import memory_of


def with_experience(
    context: AgentContext, store: BaseStore | None, user: str, thread_id: str, request: str
) -> AgentContext:
    """The run context for a turn on `request`: the system prompt stays the same for every turn;
    the experiences (from `store`, the graph's) go in a section of their own before the message."""
    if store is None:
        return context
    memory = memory_of(store)
    block = experience_prompt(relevant_notes(memory, user, request, exclude_thread=thread_id))
    return dataclasses.replace(context, turn_notes=block) if block else context


def remember_turn(
    store: BaseStore | None, user: str, request: str, result: TurnResult, end: StateSnapshot
) -> None:
    """Record the finished turn (and its lessons) in `store`, the graph's, as experience for later
    threads."""
    if store is None:
        return
    memory = memory_of(store)
    values = end.values
    record_lessons(
        memory, user, result.thread_id, result.turn, request, values.get("lessons") or []
    )
    record_experience(
        memory,
        user,
        result.thread_id,
        result.turn,
        request,
        tools_used_in_turn(values.get("messages", [])),
        # the graph's own status: a failed action is still a task and its outcome worth recalling
        # (honest_status says how it went); "failed" is kept for a turn the failure handler ended
        values.get("status") or result.status,
        result.answer,
        judged_wrong=(values.get("verdict") or {}).get("success") is False,
    )
