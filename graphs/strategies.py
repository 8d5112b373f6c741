"""The agent strategies by name: how each graph is built, which per-turn fields its input resets, and
its Mermaid diagram. Every graph shares AgentState's fields, nodes and checkpointer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from langchain_core.messages import AnyMessage, ToolCall
from langchain_core.runnables.graph import Graph
from langgraph.checkpoint.base import BaseCheckpointSaver

from graphs.plan.graph import build_plan_graph
from graphs.plan.nodes import next_step_calls
from graphs.plan.state import PLAN_TURN_RESET
from graphs.react.graph import build_graph
from graphs.reflexion.graph import build_reflexion_graph
from graphs.reflexion.state import REFLEXION_TURN_RESET
from graphs.routed.graph import build_routed_graph
from graphs.routed.state import ROUTED_TURN_RESET
from graphs.shared.closing import ErrorRoute
from graphs.shared.skeleton import StrategyGraph
from graphs.state import turn_input

DEFAULT_STRATEGY = "react"
ERROR_HANDLER = (
    "__default_error_handler__"  # LangGraph's node for set_node_defaults(error_handler=)
)
Builder = Callable[[BaseCheckpointSaver | None], StrategyGraph]


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    build: Builder
    turn_reset: Mapping[str, Any] = field(default_factory=dict)
    # Nodes that run the tool loop as a subgraph (drawn as a second diagram).
    subgraph_nodes: tuple[str, ...] = ()
    # The node before which `replay` asks about re-running side-effect tools (None: the calls are
    # asked one by one through the approval interrupt, for tools that run inside a subgraph),
    # and the calls that node is about to run.
    replay_gate: str | None = None
    gate_calls: Callable[[dict], list[ToolCall]] = lambda values: []


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "react",
            "the tool loop: one model step at a time",
            build_graph,
            {},
            (),
            "tools",
            lambda values: list(values["messages"][-1].tool_calls),
        ),
        Strategy(
            "plan",
            "Plan-and-Solve: a whole plan, executed step by step, then an answer",
            build_plan_graph,
            PLAN_TURN_RESET,
            (),
            "executor",
            next_step_calls,
        ),
        Strategy(
            "reflexion",
            "attempt, evaluate, reflect, attempt again with the lessons",
            build_reflexion_graph,
            REFLEXION_TURN_RESET,
            ("attempt",),
        ),
        Strategy(
            "routed",
            "classify first: arithmetic to the calculator, small talk to an answer",
            build_routed_graph,
            ROUTED_TURN_RESET,
            ("tool_loop",),
        ),
    )
}


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
