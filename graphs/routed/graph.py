"""Query routing (`--strategy routed`): wiring only, it reads like the diagram. The tool loop runs
as a subgraph (graphs/react/tool_loop.py).

START ─► begin_turn ─► classify ─┬─ arithmetic ─► calculator ─┬─ result ─► END
                                 │                            └─ error ──► tool_loop ─► END
                                 ├─ small talk ─► small_talk ─► END   (a model error ─► tool_loop)
                                 └─ anything else ─────────────────────► tool_loop ─► END
Where the tool loop would start with the turn's budget spent ─► finalize ─► END.
A bug in any node ─► failure_handler ─► END (the node error handler, in every strategy).
begin_turn starts the turn when no input began it (graphs/shared/turns.py).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graphs.routed.nodes import calculator, classify, small_talk, tool_loop
from graphs.routed.routing import route_after_answer, route_after_classify
from graphs.routed.state import ROUTED_TURN_RESET, RoutedState
from graphs.shared.changes import changes_only
from graphs.shared.closing import failure_handler, finalize, on_node_error
from graphs.shared.turns import begin_turn
from graphs.spec import RunSpec


def build_routed_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    graph = StateGraph(RoutedState, context_schema=RunSpec)
    graph.set_node_defaults(error_handler=on_node_error)
    graph.add_node("begin_turn", changes_only(begin_turn("routed", ROUTED_TURN_RESET)))
    graph.add_node("classify", changes_only(classify))
    graph.add_node("calculator", changes_only(calculator))
    graph.add_node("small_talk", changes_only(small_talk))
    graph.add_node("tool_loop", changes_only(tool_loop))
    graph.add_node("failure_handler", changes_only(failure_handler))
    graph.add_node("finalize", changes_only(finalize))

    graph.add_edge(START, "begin_turn")
    graph.add_edge("begin_turn", "classify")
    graph.add_conditional_edges("classify", route_after_classify)
    graph.add_conditional_edges("calculator", route_after_answer)
    graph.add_conditional_edges("small_talk", route_after_answer)
    graph.add_edge("tool_loop", END)
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer)
