"""The graphs `langgraph.json` serves run on JSON context alone (graphs/spec.RunSpec): a client of a
LangGraph server sends `{"model": "offline", ...}`, never live objects, and plain
`{"messages": [...]}` input; the first node to run begins each turn. (The same script against
`langgraph dev` and `serve` is tests/test_langgraph_api.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import ValidationError

from app import portable
from app.errors import UsageError
from graphs.spec import RunSpec
from graphs.strategies import STRATEGIES
from tests.fakes import ScriptedChatModel, ai_calls, call

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = {strategy.graph_id: name for name, strategy in STRATEGIES.items()}


def compiled(name: str):  # type: ignore[no-untyped-def]
    """The langgraph.json graph `name`, with a checkpointer, as a LangGraph server would run it."""
    graph = getattr(portable, GRAPHS[name])
    return graph.copy(update={"checkpointer": InMemorySaver()})


def ask(graph, thread: str, text: str, **run: object) -> dict:  # type: ignore[no-untyped-def]
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [{"role": "user", "content": text}]}, config, **run)
    return graph.get_state(config).values


def test_langgraph_json_names_one_graph_per_strategy_with_a_json_context_schema():
    spec = json.loads((ROOT / "langgraph.json").read_text())
    assert set(spec["graphs"]) == set(GRAPHS)
    for name, target in spec["graphs"].items():
        path, _, attribute = target.partition(":")
        assert path == "./app/portable.py" and attribute == GRAPHS[name]
        schema = getattr(portable, attribute).get_context_jsonschema()
        fields = schema["properties"]
        assert fields["max_iterations"]["default"] == 8  # the environment's, shown
        assert "APP_MAX_ITERATIONS (8 unless set)" in fields["max_iterations"]["description"]
        assert fields["approval"]["default"] is None  # left out: APP_APPROVE, else ask
        assert "omitted: the server's APP_APPROVE" in fields["approval"]["description"]
        assert schema["additionalProperties"] is False


def test_a_turn_runs_on_json_context_and_plain_input_and_its_first_node_counts_the_turns():
    graph = compiled("waypoint")
    first = ask(graph, "t", "what is 6 times 7", context={"model": "offline"})
    assert first["messages"][-1].content == "6 * 7 = 42"
    assert (first["turn"], first["iteration"], first["status"]) == (1, 2, "answered")

    second = ask(graph, "t", "what is 2 plus 2", context={"model": "offline"})
    assert second["messages"][-1].content == "2 + 2 = 4"
    assert (second["turn"], second["iteration"]) == (2, 2)  # the counters restarted
    assert second["call_signatures"] == ['calculator:{"expression": "2 + 2"}']


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_strategy_answers_with_no_context_at_all(name: str):
    values = ask(compiled(name), "t", "what is 6 times 7")
    assert "42" in values["messages"][-1].content
    assert values["turn"] == 1 and values["strategy"] == GRAPHS[name]


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        ({"max_iterations": 0}, "max_iterations"),
        ({"approval": "sometimes"}, "approval"),
        ({"modle": "offline"}, "modle"),
        ({"user": "../etc"}, "user"),
    ],
)
def test_a_bad_context_is_refused_naming_the_field(context: dict, problem: str):
    with pytest.raises(ValidationError, match=problem):
        ask(compiled("waypoint"), "t", "hello", context=context)


def test_a_registered_model_is_what_a_run_naming_it_gets():
    model = ScriptedChatModel(script=[ai_calls(call("calculator", {"expression": "2*21"})), "42."])
    portable.register_model("scripted-test", model)
    values = ask(compiled("waypoint"), "t", "anything", context={"model": "scripted-test"})
    assert values["messages"][-1].content == "42."
    model.assert_done()


def test_the_context_chooses_the_tools_and_an_unknown_one_is_named():
    context = portable.resolve(RunSpec(tools=("calculator", "get_weather")))
    assert sorted(t.name for t in context.tools) == ["calculator", "get_weather"]
    with pytest.raises(UsageError, match=r"unknown tool\(s\) in the run's context: teleport"):
        portable.resolve(RunSpec(tools=("calculator", "teleport")))


def test_an_approval_pauses_the_run_and_a_command_resumes_it(isolated: Path):
    notes = isolated / "workspace" / "notes.txt"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("old")  # overwriting a file is what needs approval
    graph = compiled("waypoint")
    config = {"configurable": {"thread_id": "t"}}
    context = {"approval": "ask"}
    graph.invoke(
        {"messages": [{"role": "user", "content": "write 'hi' to notes.txt"}]},
        config,
        context=context,
    )
    [pending] = graph.get_state(config).interrupts
    [question] = pending.value["calls"]
    assert pending.value["type"] == "approval" and question["name"] == "write_file"
    assert notes.read_text() == "old"

    graph.invoke(Command(resume={question["id"]: {"action": "approve"}}), config, context=context)

    assert notes.read_text() == "hi"
    assert graph.get_state(config).values["status"] == "answered"
