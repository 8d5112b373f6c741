"""Helpers over message lists: the current turn, dangling tool calls and their synthetic answers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage


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
