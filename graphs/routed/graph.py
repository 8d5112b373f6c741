"""Query routing (`--strategy routed`): wiring only, it reads like the diagram. The tool loop runs
as a subgraph (graphs/react/tool_loop.py).

START ─► classify ─┬─ arithmetic ─► calculator ─┬─ result ─► END
                   │                            └─ error ──► tool_loop ─► END
                   ├─ small talk ─► small_talk ─► END   (a model error ─► tool_loop)
                   └─ anything else ─────────────────────► tool_loop ─► END
Where the tool loop would start with the turn's budget spent ─► finalize ─► END.
A bug in any node ─► failure_handler ─► END (the node error handler, in every strategy).
The first node to run for a new user message begins the turn (graphs/shared/turns.py).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START

from graphs.routed.nodes import calculator, classify, small_talk, tool_loop
from graphs.routed.routing import route_after_answer, route_after_classify
from graphs.routed.state import ROUTED_TURN_RESET, RoutedState
from graphs.shared.edits import edit_safe
from graphs.shared.skeleton import StrategyGraph, strategy_graph


def build_routed_graph(checkpointer: BaseCheckpointSaver | None = None) -> StrategyGraph:
    graph = strategy_graph(
        RoutedState,
        "routed",
        ROUTED_TURN_RESET,
        {
            "classify": classify,
            "calculator": calculator,
            "small_talk": small_talk,
            "tool_loop": tool_loop,
        },
    )
    graph.add_edge(START, "classify")
    graph.add_conditional_edges("classify", edit_safe(route_after_classify))
    graph.add_conditional_edges("calculator", edit_safe(route_after_answer))
    graph.add_conditional_edges("small_talk", edit_safe(route_after_answer))
    graph.add_edge("tool_loop", END)
    return graph.compile(checkpointer=checkpointer)
