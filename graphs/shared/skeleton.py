"""What every strategy's graph has, built once: the JSON run context (RunSpec) as its context schema,
the node error handler, `failure_handler` and `finalize` to END, and every node added so that the
first to run in a turn begins it (graphs/shared/turns.py), each writes only the fields it changes
(graphs/shared/changes.py) and none runs on a thread another run changed (graphs/shared/guard.py).
A strategy adds its own nodes (by name) and wires them from START."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graphs.shared.changes import changes_only
from graphs.shared.closing import failure_handler, finalize, on_node_error
from graphs.shared.guard import one_writer
from graphs.shared.live import RunContext
from graphs.shared.turns import begins_turn, turn_start
from graphs.spec import RunSpec

# A strategy's graph, typed by its run context so a caller's `context=` is checked
StrategyGraph = CompiledStateGraph[Any, RunContext, Any, Any]


def strategy_graph(
    state: type,
    strategy: str,
    turn_reset: Mapping[str, Any],
    nodes: Mapping[str, Callable[..., Any]],
) -> StateGraph[Any, RunContext, Any, Any]:
    """A strategy's graph with the shared nodes and edges, and `nodes` added; not compiled."""
    start = turn_start(strategy, turn_reset)
    graph: StateGraph[Any, RunContext, Any, Any] = StateGraph(state, context_schema=RunSpec)
    graph.set_node_defaults(error_handler=begins_turn(on_node_error, start))
    every = {**nodes, "failure_handler": failure_handler, "finalize": finalize}
    for name, node in every.items():
        graph.add_node(name, one_writer(changes_only(begins_turn(node, start))))
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph
