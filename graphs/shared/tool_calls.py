"""Run the tool calls of one AI message: validate, execute concurrently, turn failures into ToolMessages."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from typing import Any

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from graphs.shared.messages import new_message_id
from graphs.shared.recorded import recording, start_recorded
from tools import side_effect_names
from tools.errors import ToolError

StreamWriter = Callable[[dict[str, Any]], None]
# Where an error result keeps the words meant for the person (ToolError.user_message) beside the
# model's (the content): stored with the message, never sent to an endpoint (a tool message sends
# its content only).
USER_MESSAGE = "waypoint_user_message"


def for_user(message: ToolMessage) -> str:
    """What the person is shown of a tool result: its user message, else its content."""
    said = message.additional_kwargs.get(USER_MESSAGE)
    return said if isinstance(said, str) else str(message.content)


def run_tool_calls(
    request: AIMessage,
    tools_by_name: dict[str, BaseTool],
    writer: StreamWriter,
    max_result_chars: int,
) -> list[ToolMessage]:
    """Answer every call of the message, valid or not, in the order the model made them. In a
    graph run with a checkpointer, the calls of tools with side effects run once: their results
    are recorded, and a node re-executed after a crash returns them (graphs/shared/recorded.py)."""
    invalid = [_answer_invalid_call(c, tools_by_name) for c in request.invalid_tool_calls]
    calls = request.tool_calls

    def run(call: ToolCall) -> ToolMessage:
        return _run_one(call, tools_by_name, writer, max_result_chars)

    once = side_effect_names(tools_by_name.values()) if recording() else frozenset()
    # Started first, in the model's order, from this thread: see start_recorded.
    recorded = {i: start_recorded(c, run) for i, c in enumerate(calls) if c["name"] in once}
    direct = _run_concurrently([c for i, c in enumerate(calls) if i not in recorded], run)
    results = [
        _joined(recorded[i], call, writer) if i in recorded else direct.pop(0)
        for i, call in enumerate(calls)
    ]
    for message in invalid:
        writer(
            {
                "type": "tool_result",
                "id": message.tool_call_id,
                "name": message.name,
                "status": "error",
                "content": message.content,
                "duration_ms": 0,
            }
        )
    return results + invalid


def _run_concurrently(calls: list[ToolCall], run: Callable[[ToolCall], ToolMessage]) -> list:
    if len(calls) <= 1:
        return [run(c) for c in calls]
    # Each worker runs in a copy of this context: the stream writer needs the run's config.
    with ThreadPoolExecutor(max_workers=min(8, len(calls))) as pool:
        futures = [pool.submit(copy_context().run, run, c) for c in calls]
        return [f.result() for f in futures]


def _joined(
    result: Callable[[], tuple[ToolMessage, bool]], call: ToolCall, writer: StreamWriter
) -> ToolMessage:
    """A recorded call's result; one recorded by an earlier execution of the node is shown again
    (marked `recorded`), since the call does not run to show it."""
    message, ran = result()
    if not ran:
        said = message.additional_kwargs.get(USER_MESSAGE)
        shown = {"id": call["id"], "name": call["name"], "recorded": True}
        writer({"type": "tool_call", **shown, "args": call["args"]})
        writer(
            {"type": "tool_result", **shown, "status": message.status, "content": message.content}
            | {"duration_ms": 0, "user_message": said}
        )
    return message


def _run_one(
    call: ToolCall, tools_by_name: dict[str, BaseTool], writer: StreamWriter, limit: int
) -> ToolMessage:
    writer({"type": "tool_call", "id": call["id"], "name": call["name"], "args": call["args"]})
    started = time.perf_counter()
    status, content, artifact, user_message = _execute(call, tools_by_name)
    content = truncate(content, limit)
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    writer(
        {
            "type": "tool_result",
            "id": call["id"],
            "name": call["name"],
            "status": status,
            "content": content,
            "duration_ms": duration_ms,
            "user_message": user_message,
        }
    )
    return ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        status=status,
        artifact=artifact,
        id=new_message_id("tool"),
        additional_kwargs={USER_MESSAGE: user_message} if user_message else {},
    )


def _execute(
    call: ToolCall, tools_by_name: dict[str, BaseTool]
) -> tuple[str, str, Any, str | None]:
    """(status, content, artifact, user message). Invoked with the whole call, so tools that
    journal what they changed (content_and_artifact) hand back their artifact too."""
    tool = tools_by_name.get(call["name"])
    if tool is None:
        return "error", unknown_tool_message(call["name"], tools_by_name), None, None
    try:
        result = tool.invoke({**call, "type": "tool_call"})
    except ToolError as exc:
        return "error", str(exc), None, exc.user_message
    except ValidationError as exc:
        return "error", invalid_arguments_message(call["name"], exc, tool), None, None
    if isinstance(result, ToolMessage):
        return "success", _as_text(result.content), result.artifact, None
    return "success", _as_text(result), None, None


def _answer_invalid_call(call: InvalidToolCall, tools_by_name: dict[str, BaseTool]) -> ToolMessage:
    name = call.get("name") or "unknown"
    reason = call.get("error") or "the arguments are not valid JSON"
    content = (
        f"the call to '{name}' could not be parsed ({reason}); "
        f"raw arguments: {str(call.get('args'))[:300]!r}. Send the call again with the "
        f"arguments as one JSON object. Valid tools: {', '.join(sorted(tools_by_name))}."
    )
    return ToolMessage(
        content=content,
        tool_call_id=call.get("id") or new_message_id("call"),
        name=name,
        status="error",
        id=new_message_id("tool"),
    )


def unknown_tool_message(name: str, tools_by_name: dict[str, BaseTool]) -> str:
    valid = ", ".join(sorted(tools_by_name)) or "(no tools are enabled)"
    return f"there is no tool named '{name}'. Valid tools: {valid}."


def invalid_arguments_message(name: str, exc: ValidationError, tool: BaseTool) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()
    )
    expected = ", ".join(_describe_fields(tool))
    return f"invalid arguments for {name}: {problems}. Expected arguments: {expected}."


def _describe_fields(tool: BaseTool) -> Sequence[str]:
    properties = _json_schema(tool).get("properties", {})
    return [f"{key} ({spec.get('type', 'any')})" for key, spec in properties.items()] or ["none"]


def _json_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of a tool's arguments: an MCP tool's is JSON schema already, others' a
    pydantic model (version 2, or version 1 through langchain's compatibility)."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return schema
    if issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return schema.schema()


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…[truncated: {len(text) - limit} more characters]"


def _as_text(result: object) -> str:
    return result if isinstance(result, str) else str(result)
