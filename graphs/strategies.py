"""The strategy registry: every strategy by name (each package's graphs/<name>/strategy.py, found
by graphs/catalog.py), which per-turn fields its input resets, and its Mermaid diagram. Every graph
shares AgentState's fields, nodes and checkpointer."""

from __future__ import annotations

from importlib import import_module
from typing import get_args

from langchain_core.messages import AnyMessage
from langchain_core.runnables.graph import Graph
from langgraph.checkpoint.base import BaseCheckpointSaver

from graphs.catalog import DEFAULT_STRATEGY, STRATEGY_MODULE, STRATEGY_NAMES, Strategy
from graphs.react.graph import build_graph
from graphs.shared.closing import ErrorRoute
from graphs.shared.skeleton import StrategyGraph
from graphs.state import turn_input

__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "Strategy", "get_strategy"]

ERROR_HANDLER = (
    "__default_error_handler__"  # LangGraph's node for set_node_defaults(error_handler=)
)


def _load(name: str) -> Strategy:
    strategy = import_module(f"graphs.{name}.{STRATEGY_MODULE}").STRATEGY
    if not isinstance(strategy, Strategy) or strategy.name != name:
        raise TypeError(
            f"graphs/{name}/{STRATEGY_MODULE}.py must define STRATEGY = Strategy(name={name!r}, ...)"
        )
    return strategy


STRATEGIES: dict[str, Strategy] = {name: _load(name) for name in STRATEGY_NAMES}


class UnknownStrategyError(ValueError):
    """A strategy name that is not in STRATEGIES."""


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        names = ", ".join(STRATEGIES)
        raise UnknownStrategyError(f"unknown strategy '{name}'; use one of: {names}") from None


def strategy_turn_input(
    strategy: Strategy, message: AnyMessage, turn: int, started_at: float | None = None
) -> dict:
    """The input of a new user turn: AgentState's resets, the strategy's own, and its name."""
    return (
        turn_input(message, turn, started_at)
        | dict(strategy.turn_reset)
        | {"strategy": strategy.name}
    )


def stored_strategy(checkpointer: BaseCheckpointSaver, thread_id: str) -> str | None:
    """The strategy of the thread's last turn, read from the head checkpoint's raw channel values
    (no message replay), or None for a new thread or one older than strategies."""
    saved = checkpointer.get_tuple({"configurable": {"thread_id": thread_id}})
    if saved is None:
        return None
    value = saved.checkpoint.get("channel_values", {}).get("strategy")
    return value if isinstance(value, str) and value in STRATEGIES else None


def mermaid(name: str) -> str:
    """The strategy's graph as Mermaid; a tool-loop subgraph node is followed by the loop's own."""
    strategy = get_strategy(name)
    parts = [f"%% strategy: {name} — {strategy.summary}", _draw(strategy.build(None))]
    for node in strategy.subgraph_nodes:
        parts += [f"%% {node}: the tool loop, run as a subgraph", _draw(build_graph())]
    return "\n".join(parts)


def _draw(graph: StrategyGraph) -> str:
    return drawing(graph).draw_mermaid()


def drawing(graph: StrategyGraph) -> Graph:
    """The graph as LangGraph draws it, plus what that drawing leaves out: the route of the node
    error handler (entered by an exception in any node, it goes where on_node_error's Command
    says) and the static edges of the nodes only that route reaches."""
    drawn = graph.get_graph(xray=True)
    if ERROR_HANDLER not in drawn.nodes:
        return drawn
    present = {(edge.source, edge.target) for edge in drawn.edges}
    routes = [(ERROR_HANDLER, target, True) for target in get_args(ErrorRoute)]
    routes += [(source, target, False) for source, target in graph.builder.edges]
    for source, target, conditional in routes:
        if (source, target) not in present:
            drawn.add_edge(drawn.nodes[source], drawn.nodes[target], conditional=conditional)
    return drawn
