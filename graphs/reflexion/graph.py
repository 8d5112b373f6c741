"""Reflexion (`--strategy reflexion`): wiring only, it reads like the diagram. Each attempt is the tool
loop run as a subgraph (graphs/react/tool_loop.py), with this turn's lessons in its prompt, up to
`max_trials` attempts.

START ─► begin_turn ─► attempt ─┬─ answered ─► evaluate ─┬─ success / no trials left ─► END
                                │                        ├─ failure ─► reflect ─► attempt
                                │                        ├─ failure, turn budget spent ─► finalize ─► END
                                │                        └─ transient model error ─► retry ─► evaluate
                                └─ failed, cancelled or budget spent ─────────────────────► END
A bug in any node ─► failure_handler ─► END (the node error handler, in every strategy).
begin_turn starts the turn when no input began it (graphs/shared/turns.py).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graphs.reflexion.nodes import attempt, evaluate, reflect
from graphs.reflexion.routing import route_after_attempt, route_after_evaluate
from graphs.reflexion.state import REFLEXION_TURN_RESET, ReflexionState
from graphs.shared.changes import changes_only
from graphs.shared.closing import failure_handler, finalize, on_node_error
from graphs.shared.recovery import retry
from graphs.shared.turns import begin_turn
from graphs.spec import RunSpec


def build_reflexion_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    graph = StateGraph(ReflexionState, context_schema=RunSpec)
    graph.set_node_defaults(error_handler=on_node_error)
    graph.add_node("begin_turn", changes_only(begin_turn("reflexion", REFLEXION_TURN_RESET)))
    graph.add_node("attempt", changes_only(attempt))
    graph.add_node("evaluate", changes_only(evaluate))
    graph.add_node("reflect", changes_only(reflect))
    graph.add_node("retry", changes_only(retry))
    graph.add_node("failure_handler", changes_only(failure_handler))
    graph.add_node("finalize", changes_only(finalize))

    graph.add_edge(START, "begin_turn")
    graph.add_edge("begin_turn", "attempt")
    graph.add_conditional_edges("attempt", route_after_attempt)
    graph.add_conditional_edges("evaluate", route_after_evaluate)
    graph.add_edge("reflect", "attempt")
    graph.add_edge("retry", "evaluate")
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer)
