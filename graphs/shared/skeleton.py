"""What every strategy's graph has, built once: the JSON run context (RunSpec) as its context schema,
the node error handler, `begin_turn` first, `failure_handler` and `finalize` to END, and every node
added so that it writes only the fields it changes (graphs/shared/changes.py). A strategy adds its
own nodes (by name) and wires them from `begin_turn`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph.graph import END, START, StateGraph

from graphs.shared.changes import changes_only
from graphs.shared.closing import failure_handler, finalize, on_node_error
from graphs.shared.turns import begin_turn
from graphs.spec import RunSpec


def strategy_graph(
    state: type,
    strategy: str,
    turn_reset: Mapping[str, Any],
    nodes: Mapping[str, Callable[..., Any]],
) -> StateGraph:
    """A strategy's graph with the shared nodes and edges, and `nodes` added; not compiled."""
    graph = StateGraph(state, context_schema=RunSpec)
    graph.set_node_defaults(error_handler=on_node_error)
    every = {
        "begin_turn": begin_turn(strategy, turn_reset),
        **nodes,
        "failure_handler": failure_handler,
        "finalize": finalize,
    }
    for name, node in every.items():
        graph.add_node(name, changes_only(node))
    graph.add_edge(START, "begin_turn")
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph
