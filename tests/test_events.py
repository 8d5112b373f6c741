"""Stream events are one closed union (app/service/events.py): every event the graphs write has a
type, and the terminal, --jsonl and the server's SSE consume the same objects."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path
from typing import get_args

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from rich.console import Console

from app.cli.render import ConsoleRenderer, JsonlRenderer
from app.server.standard.runs import Run, StandardSink
from app.service.events import (
    CUSTOM_TYPES,
    Event,
    GraphChunk,
    MessageOut,
    NodeFailed,
    NodeUpdate,
    Notice,
    Retry,
    StateValues,
    StrategyNote,
    Summarized,
    Token,
    ToolCallStarted,
    ToolFinished,
    TurnEnd,
    as_json,
    from_stream,
)

ROOT = Path(__file__).resolve().parents[1]

ONE_OF_EACH: list[Event] = [
    Token("agent", "Hel", "m1"),
    MessageOut(ToolMessage("42", tool_call_id="c1", name="calculator")),
    StateValues({"turn": 1}),
    ToolCallStarted("c1", "calculator", {"expression": "6*7"}),
    ToolFinished("c1", "calculator", "success", "42", 1.5),
    Retry(1, 3, 0.5, "transient", "HTTP 503"),
    Summarized(12, 300, "budget", 4096, 2048, 0),
    StrategyNote("trial", {"trial": 1, "max_trials": 2}),
    NodeFailed("agent", "ValueError: boom", "Traceback ..."),
    NodeUpdate("agent", {"messages": [AIMessage("It is 42.", id="m2")]}),
    GraphChunk("tasks", {"id": "t1", "name": "agent", "input": {}, "triggers": []}),
    Notice("approval policy: never"),
    TurnEnd("t", 1, "answered", "It is 42."),
]


def custom_types_written_by_the_graphs() -> set[str]:
    """The `type` of every dict the graphs' nodes hand to a stream writer."""
    found: set[str] = set()
    for path in (ROOT / "graphs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")
            )
            event = node.args[0]
            while isinstance(event, ast.BinOp):  # {"type": ...} | {...}
                event = event.left
            if name not in {"writer", "stream_writer"} or not isinstance(event, ast.Dict):
                continue
            for key, value in zip(event.keys, event.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "type":
                    assert isinstance(value, ast.Constant), f"{path}: a computed event type"
                    found.add(value.value)
    return found


def test_the_union_covers_every_event_the_graphs_write():
    written = custom_types_written_by_the_graphs()
    assert written == set(CUSTOM_TYPES), written ^ set(CUSTOM_TYPES)


def test_one_example_of_each_event_type_is_tested():
    assert {type(e) for e in ONE_OF_EACH} == set(get_args(Event))


def test_an_unknown_custom_event_is_a_clear_error_naming_the_file_to_change():
    with pytest.raises(ValueError, match=r"unknown stream event type 'mystery'.*events\.py"):
        from_stream("custom", {"type": "mystery"})


def test_langgraph_stream_items_become_typed_events():
    chunk = AIMessageChunk(content="Hi", id="m1")
    assert from_stream("messages", (chunk, {"langgraph_node": "agent"})) == [
        Token("agent", "Hi", "m1")
    ]
    [silent] = from_stream("messages", (AIMessageChunk(content=""), {}), ("attempt:1",))
    assert silent.text == "" and silent.namespace == ("attempt:1",)
    result_message = ToolMessage("42", tool_call_id="c1")
    assert from_stream("messages", (result_message, {})) == [MessageOut(result_message)]
    assert from_stream("values", {"turn": 2}) == [StateValues({"turn": 2})]
    result = {
        "type": "tool_result",
        "id": "c",
        "name": "f",
        "status": "error",
        "content": "no",
        "duration_ms": 0,
    }
    assert from_stream("custom", result) == [ToolFinished("c", "f", "error", "no", 0)]
    assert from_stream("custom", {"type": "lesson", "trial": 1, "lesson": "x"}) == [
        StrategyNote("lesson", {"trial": 1, "lesson": "x"})
    ]
    assert from_stream("updates", {"agent": {"iteration": 1}}) == [
        NodeUpdate("agent", {"iteration": 1})
    ]


def test_the_wire_form_is_the_jsonl_events_documented_in_the_readme():
    wire = {as_json(e)["event"]: as_json(e) for e in ONE_OF_EACH}
    assert list(wire) == [
        "token",
        "message",
        "values",
        "tool_call",
        "tool_result",
        "retry",
        "summarized",
        "trial",
        "error",
        "node",
        "graph",
        "notice",
        "final",
    ]
    assert wire["tool_call"] == {
        "event": "tool_call",
        "name": "calculator",
        "id": "c1",
        "args": {"expression": "6*7"},
    }
    failed = next(e for e in ONE_OF_EACH if isinstance(e, NodeFailed))
    assert "traceback" not in wire["error"]
    assert as_json(failed, traceback=True)["traceback"] == "Traceback ..."
    assert wire["node"]["update"] == {"messages": [{"type": "ai", "content": "It is 42."}]}


def test_every_sink_consumes_every_event_type():
    out, err = io.StringIO(), io.StringIO()
    console = ConsoleRenderer(Console(file=out, width=100), Console(file=err, width=100))
    jsonl_out = io.StringIO()
    jsonl = JsonlRenderer(Console(file=jsonl_out))
    run = Run("r", "t", "a", {}, "enqueue", {})
    server = StandardSink(run, ["values", "updates", "messages-tuple", "custom"], subgraphs=False)
    for event in ONE_OF_EACH:
        for sink in (console, jsonl, server):
            sink.emit(event)

    lines = [json.loads(line) for line in jsonl_out.getvalue().splitlines()]
    # the whole state and whole messages are for LangGraph API clients, not --jsonl
    assert not {"message", "values"} & {line["event"] for line in lines}
    assert "traceback" not in next(line for line in lines if line["event"] == "error")
    # the server: LangGraph's modes, and Waypoint's own events (without a traceback) as custom,
    # but no summary of the turn (`final`): LangGraph's server sends none
    modes = [name for name, _ in run.events]
    assert modes == ["messages", "messages", "values"] + ["custom"] * 6 + ["updates"] + ["custom"]
    custom = [data for name, data in run.events if name == "custom"]
    assert [c["type"] for c in custom] == [
        line["event"] for line in lines if line["event"] not in ("token", "node", "final")
    ]
    assert "traceback" not in next(c for c in custom if c["type"] == "error")
    assert "It is 42." in out.getvalue()
    assert "calculator" in err.getvalue() and "retry 1/3" in err.getvalue()
    assert console.partial_answer() == jsonl.partial_answer() == server.partial_answer() == "Hel"
