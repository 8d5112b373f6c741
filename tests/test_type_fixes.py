"""Bugs the type checker found (issue 33): each test failed before its fix."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.managed import RemainingSteps
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from app.server.standard.assistants import state_jsonschema
from app.server.standard.runs import _added
from graphs.shared.tool_calls import invalid_arguments_message


class _Count(BaseModel):
    count: int


def _validation_error() -> ValidationError:
    try:
        _Count(count="many")  # type: ignore[arg-type]  # the wrong type on purpose
    except ValidationError as exc:
        return exc
    raise AssertionError("the model accepted a string for an int")


def test_a_tool_described_by_json_schema_gets_its_arguments_listed():
    """An MCP tool's arguments are JSON schema, not a pydantic model (was AttributeError)."""
    schema = {"type": "object", "properties": {"count": {"type": "integer"}}}
    tool = StructuredTool(name="mcp_tool", description="d", args_schema=schema, func=lambda: "")
    message = invalid_arguments_message("mcp_tool", _validation_error(), tool)
    assert message.endswith("Expected arguments: count (integer).")


class _StateWithManagedValue(TypedDict):
    count: int
    remaining_steps: RemainingSteps


def test_a_managed_value_is_no_field_of_the_state_schema():
    """A managed channel (LangGraph's RemainingSteps) has no ValueType (was AttributeError)."""
    graph = StateGraph(_StateWithManagedValue)
    graph.add_node("step", lambda state: {})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    assert list(state_jsonschema(graph.compile())["properties"]) == ["count"]


def test_a_streamed_message_adds_up_chunks_only():
    """A chunk after the whole message replaces it; a message plus a chunk made a prompt."""
    whole = AIMessage("Paris", id="m1")
    assert _added(whole, AIMessageChunk("Par", id="m1")) == AIMessageChunk("Par", id="m1")
    added = _added(AIMessageChunk("Par", id="m1"), AIMessageChunk("is", id="m1"))
    assert isinstance(added, AIMessageChunk) and added.text == "Paris"
