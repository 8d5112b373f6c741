"""Every strategy's graph pinned: its exact nodes and edges (the tool-loop subgraph included), no node
that nothing leads to, and every router named by a graph covered by tests/test_strategy_routers.py."""

from __future__ import annotations

import inspect
import typing

import pytest
from langgraph.types import Command

from graphs.react.tool_loop import TOOL_LOOP
from graphs.shared.closing import ErrorRoute, on_node_error
from graphs.strategies import ERROR_HANDLER, STRATEGIES, drawing, mermaid

SHARED_NODES = {"__start__", "__end__", ERROR_HANDLER, "failure_handler", "finalize"}
# The node error handler's route, which LangGraph's drawing leaves out (graphs.strategies.drawing).
# No node of its own begins a turn: the first node to run does (graphs/shared/turns.py).
ERROR_EDGES = {
    (ERROR_HANDLER, "failure_handler", True),
    (ERROR_HANDLER, "__end__", True),  # when the failure handler itself failed
    ("failure_handler", "__end__", False),
}

NODES = {
    "react": SHARED_NODES | {"agent", "tools", "retry", "summarize"},
    "plan": SHARED_NODES | {"planner", "executor", "synthesizer", "retry", "summarize"},
    "reflexion": SHARED_NODES | {"attempt", "evaluate", "reflect", "retry"},
    "routed": SHARED_NODES | {"classify", "calculator", "small_talk", "tool_loop"},
}
EDGES = {
    "react": ERROR_EDGES
    | {
        ("__start__", "agent", True),
        ("__start__", "summarize", True),
        ("agent", "tools", True),
        ("agent", "retry", True),
        ("agent", "summarize", True),
        ("agent", "failure_handler", True),
        ("agent", "finalize", True),
        ("agent", "__end__", True),
        ("tools", "agent", True),
        ("tools", "retry", True),
        ("tools", "failure_handler", True),
        ("tools", "finalize", True),
        ("retry", "agent", False),
        ("summarize", "agent", False),
        ("finalize", "__end__", False),
    },
    "plan": ERROR_EDGES
    | {
        ("__start__", "planner", True),
        ("__start__", "summarize", True),
        ("planner", "executor", True),
        ("planner", "synthesizer", True),
        ("planner", "retry", True),
        ("planner", "summarize", True),
        ("planner", "failure_handler", True),
        ("planner", "finalize", True),
        ("executor", "executor", True),
        ("executor", "planner", True),
        ("executor", "synthesizer", True),
        ("executor", "finalize", True),
        ("synthesizer", "retry", True),
        ("synthesizer", "summarize", True),
        ("synthesizer", "failure_handler", True),
        ("synthesizer", "finalize", True),
        ("synthesizer", "__end__", True),
        ("retry", "planner", True),
        ("retry", "synthesizer", True),
        ("summarize", "planner", True),
        ("summarize", "synthesizer", True),
        ("finalize", "__end__", False),
    },
    "reflexion": ERROR_EDGES
    | {
        ("__start__", "attempt", False),
        ("attempt", "evaluate", True),
        ("attempt", "__end__", True),
        ("evaluate", "reflect", True),
        ("evaluate", "retry", True),
        ("evaluate", "finalize", True),
        ("evaluate", "__end__", True),
        ("reflect", "attempt", False),
        ("retry", "evaluate", False),
        ("finalize", "__end__", False),
    },
    "routed": ERROR_EDGES
    | {
        ("__start__", "classify", False),
        ("classify", "calculator", True),
        ("classify", "small_talk", True),
        ("classify", "tool_loop", True),
        ("classify", "finalize", True),
        ("calculator", "tool_loop", True),
        ("calculator", "finalize", True),
        ("calculator", "__end__", True),
        ("small_talk", "tool_loop", True),
        ("small_talk", "finalize", True),
        ("small_talk", "__end__", True),
        ("tool_loop", "__end__", False),
        ("finalize", "__end__", False),
    },
}
SUBGRAPHS = {"react": (), "plan": (), "reflexion": ("attempt",), "routed": ("tool_loop",)}


def topology(graph) -> tuple[set[str], set[tuple[str, str, bool]]]:
    drawn = drawing(graph)
    return set(drawn.nodes), {(e.source, e.target, e.conditional) for e in drawn.edges}


def test_every_strategy_is_pinned():
    assert set(STRATEGIES) == set(NODES) == set(EDGES) == set(SUBGRAPHS)


@pytest.mark.parametrize("name", sorted(NODES))
def test_nodes_and_edges_of_each_strategy(name: str):
    nodes, edges = topology(STRATEGIES[name].build(None))
    assert nodes == NODES[name]
    assert edges == EDGES[name]


@pytest.mark.parametrize("name", sorted(NODES))
def test_the_tool_loop_subgraph_is_the_react_graph(name: str):
    assert STRATEGIES[name].subgraph_nodes == SUBGRAPHS[name]
    assert topology(TOOL_LOOP) == (NODES["react"], EDGES["react"])
    for node in SUBGRAPHS[name]:
        assert f"%% {node}: the tool loop, run as a subgraph" in mermaid(name)


@pytest.mark.parametrize("graph", [*sorted(NODES), "tool loop"])
def test_no_node_without_an_incoming_edge_or_a_way_out(graph: str):
    compiled = TOOL_LOOP if graph == "tool loop" else STRATEGIES[graph].build(None)
    nodes, edges = topology(compiled)
    entered = {target for _, target, _ in edges}
    left = {source for source, _, _ in edges}
    # START is where a run begins; the error handler is entered by an exception in any node.
    assert nodes - entered == {"__start__", ERROR_HANDLER}
    assert nodes - left == {"__end__"}


def test_the_error_route_drawn_is_the_one_the_error_handler_takes():
    assert typing.get_type_hints(on_node_error)["return"] == Command[ErrorRoute]
    assert typing.get_args(ErrorRoute) == ("failure_handler", "__end__")


def test_every_router_has_unit_tests_on_plain_dicts():
    from tests.test_strategy_routers import CASES

    routers = {
        inspect.unwrap(branch.path.func)  # graphs/shared/edits.py wraps a router that reads limits
        for strategy in STRATEGIES.values()
        for branches in strategy.build(None).builder.branches.values()
        for branch in branches.values()
    }
    assert routers <= set(CASES)
