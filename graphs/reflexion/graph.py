"""Reflexion (`--strategy reflexion`): wiring only, it reads like the diagram. Each attempt is the tool
loop run as a subgraph (graphs/react/tool_loop.py), with this turn's lessons in its prompt, up to
`max_trials` attempts.

START ─► attempt ─┬─ answered ─► evaluate ─┬─ success / no trials left ─► END
                  │                        ├─ failure ─► reflect ─► attempt
                  │                        ├─ failure, turn budget spent ─► finalize ─► END
                  │                        └─ transient model error ─► retry ─► evaluate
                  └─ failed, cancelled or budget spent ─────────────────────► END
A bug in any node ─► failure_handler ─► END (the node error handler, in every strategy).
The first node to run for a new user message begins the turn (graphs/shared/turns.py).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START

from graphs.reflexion.nodes import attempt, evaluate, reflect
from graphs.reflexion.routing import route_after_attempt, route_after_evaluate
from graphs.reflexion.state import REFLEXION_TURN_RESET, ReflexionState
from graphs.shared.edits import edit_safe
from graphs.shared.recovery import retry
from graphs.shared.skeleton import StrategyGraph, strategy_graph


def build_reflexion_graph(checkpointer: BaseCheckpointSaver | None = None) -> StrategyGraph:
    graph = strategy_graph(
        ReflexionState,
        "reflexion",
        REFLEXION_TURN_RESET,
        {"attempt": attempt, "evaluate": evaluate, "reflect": reflect, "retry": retry},
    )
    graph.add_edge(START, "attempt")
    graph.add_conditional_edges("attempt", edit_safe(route_after_attempt))
    graph.add_conditional_edges("evaluate", edit_safe(route_after_evaluate))
    graph.add_edge("reflect", "attempt")
    graph.add_edge("retry", "evaluate")
    return graph.compile(checkpointer=checkpointer)
