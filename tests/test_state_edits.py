"""Editing a thread's state as any node (`threads.update_state(values, as_node=...)`, what LangGraph
Studio does) works for every strategy, on Waypoint's `serve` and on `langgraph dev`, through the
official SDK; the next turn after the edit runs normally (issue 28, item 4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph_sdk import get_sync_client

from app.config import load_settings
from app.service.context import make_context
from graphs.strategies import ERROR_HANDLER, STRATEGIES
from tests.test_langgraph_api import langgraph_dev, needs_langgraph_cli, serve  # noqa: F401

GRAPH_IDS = {strategy.graph_id: name for name, strategy in STRATEGIES.items()}


def editable_nodes(strategy: str) -> list[str]:
    """Every node a client can name in an edit (LangGraph's own error-handler node aside)."""
    return [n for n in STRATEGIES[strategy].build(None).nodes if n != ERROR_HANDLER]


EDITS = [(graph_id, node) for graph_id, name in GRAPH_IDS.items() for node in editable_nodes(name)]


def edit_every_node(base: str) -> dict[tuple[str, str], str]:
    """For each (graph, node): a turn, an edit as that node, then the next turn's answer."""
    client = get_sync_client(url=base)
    answers = {}
    for graph_id, node in EDITS:
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, graph_id, input=user("what is 2 plus 2"))
        edit = {"messages": [{"type": "ai", "content": f"edited as {node}", "id": f"edit-{node}"}]}
        client.threads.update_state(tid, edit, as_node=node)
        edited = client.threads.get_state(tid)["values"]["messages"]
        assert edited[-1]["content"] == f"edited as {node}", (graph_id, node)
        after = client.runs.wait(tid, graph_id, input=user("what is 3 plus 3"))
        answers[(graph_id, node)] = after["messages"][-1]["content"]
    return answers


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def test_every_node_of_every_strategy_can_be_edited_on_serve(serve: tuple[str, Path]):  # noqa: F811
    answers = edit_every_node(serve[0])
    assert answers == {edit: "3 + 3 = 6" for edit in EDITS}


@needs_langgraph_cli
def test_every_node_of_every_strategy_can_be_edited_on_langgraph_dev(
    langgraph_dev: tuple[str, Path],  # noqa: F811
):
    answers = edit_every_node(langgraph_dev[0])
    assert answers == {edit: "3 + 3 = 6" for edit in EDITS}


@pytest.mark.parametrize(("graph_id", "node"), EDITS)
def test_an_edit_routes_like_the_node_and_the_next_turn_runs(
    tmp_path: Path, graph_id: str, node: str
):
    """In process, on a real SQLite saver: the edit is kept and the next turn answers."""
    context = make_context(load_settings())
    with sqlite3.connect(tmp_path / "db.sqlite", check_same_thread=False) as conn:
        graph = STRATEGIES[GRAPH_IDS[graph_id]].build(SqliteSaver(conn))
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke(
            {"messages": [HumanMessage("what is 2 plus 2", id="h1")]}, config, context=context
        )
        graph.update_state(config, {"messages": [AIMessage("edited", id="e1")]}, as_node=node)
        assert graph.get_state(config).values["messages"][-1].content == "edited"
        after = graph.invoke(
            {"messages": [HumanMessage("what is 3 plus 3", id="h2")]}, config, context=context
        )
        assert after["messages"][-1].content == "3 + 3 = 6"


def test_a_tool_call_edited_in_as_the_model_goes_to_the_tools(tmp_path: Path):
    """The edit is routed by the node's own router: what `agent` decides for a tool call."""
    context = make_context(load_settings())
    with sqlite3.connect(tmp_path / "db.sqlite", check_same_thread=False) as conn:
        graph = STRATEGIES["react"].build(SqliteSaver(conn))
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, config, context=context)
        call = {"name": "calculator", "args": {"expression": "5*5"}, "id": "c1"}
        graph.update_state(
            config, {"messages": [AIMessage("", tool_calls=[call])]}, as_node="agent"
        )
        assert graph.get_state(config).next == ("tools",)
        after = graph.invoke(None, config, context=context)
        assert [m.type for m in after["messages"][-3:]] == ["ai", "tool", "ai"]
        assert after["messages"][-2].content == "25"
