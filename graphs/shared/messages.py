"""Helpers over message lists: the current turn, dangling tool calls and their synthetic answers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

# The LangGraph task a tool call with side effects runs as (graphs/shared/recorded.py): its result
# also shows in a run's `updates` stream under this name. Here, so front ends can skip it cheaply.
RECORDED_TASK = "recorded_tool_call"


def new_message_id(prefix: str) -> str:
    """Messages get ids when they are created, so DeltaChannel replays rebuild identical lists."""
    return f"{prefix}-{uuid.uuid4().hex}"


def current_turn(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Messages from the last human message (inclusive) to the end."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return list(messages[index:])
    return list(messages)


def last_ai_message(messages: Sequence[AnyMessage]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def call_signature(name: str, args: object) -> str:
    """Canonical `name+args` of a tool call, used for loop detection."""
    return f"{name}:{json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)}"


def dangling_tool_calls(messages: Sequence[AnyMessage]) -> list[ToolCall]:
    """Tool calls of the last AI message that no ToolMessage answers (an interrupted tools step)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
            calls = [*message.tool_calls, *_invalid_as_calls(message)]
            return [c for c in calls if c["id"] not in answered]
        if isinstance(message, HumanMessage):
            return []
    return []


def _invalid_as_calls(message: AIMessage) -> list[ToolCall]:
    return [
        ToolCall(name=c.get("name") or "invalid", args={}, id=c["id"], type="tool_call")
        for c in message.invalid_tool_calls
        if c.get("id")
    ]


def cancelled_results(calls: Sequence[ToolCall], reason: str) -> list[ToolMessage]:
    """Synthetic error results that close dangling calls, so the history stays valid for any API."""
    return [
        ToolMessage(
            content=f"not run: {reason}",
            tool_call_id=call["id"],
            name=call["name"],
            status="error",
            id=new_message_id("tool"),
        )
        for call in calls
    ]


NOTICE_KEY = "waypoint_notice"


def notice_message(text: str, kind: str) -> AIMessage:
    """Waypoint's own words closing a turn (a failure, a spent budget): stored, so the user and the
    history see them, but marked, so the model is never told it said them (`for_model`)."""
    return AIMessage(content=text, id=new_message_id("ai"), additional_kwargs={NOTICE_KEY: kind})


def is_notice(message: AnyMessage) -> bool:
    return bool(getattr(message, "additional_kwargs", {}).get(NOTICE_KEY))


# Marks the system message that carries a turn's notes (never sent: ChatOpenAI sends a system
# message's content and name only).
NOTES_KEY = "waypoint_turn_notes"


def for_model(messages: Sequence[AnyMessage], notes: str = "") -> list[AnyMessage]:
    """The conversation as the model may read it: without Waypoint's notices, and with the turn's
    `notes` (e.g. relevant past experience) as a system section of their own just before the user's
    current message, which stays the user's words alone: background the model reads as such, not
    text the user wrote. Per-turn material goes last, so the prompt's prefix (system prompt, tool
    schemas, earlier turns) is the same from turn to turn and a server's prompt cache can reuse it."""
    kept = [m for m in messages if not is_notice(m)]
    if not notes:
        return kept
    for index in range(len(kept) - 1, -1, -1):
        if isinstance(kept[index], HumanMessage):
            section = SystemMessage(content=notes, additional_kwargs={NOTES_KEY: True})
            return [*kept[:index], section, *kept[index:]]
    return kept


def is_notes(message: BaseMessage) -> bool:
    """The system section `for_model` put the turn's notes in."""
    return isinstance(message, SystemMessage) and bool(message.additional_kwargs.get(NOTES_KEY))
