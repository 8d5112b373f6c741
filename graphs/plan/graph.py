"""Plan-and-Solve (`--strategy plan`): wiring only, it reads like the diagram.

START ─► begin_turn ─(over budget)─► summarize ─► planner
START ─► begin_turn ─► planner ─┬─ valid plan ──► executor ─┬─ steps left ─────────► executor
                                │                           ├─ step failed (once) ─► planner (re-plan the rest)
                                │                           ├─ budget spent ───────► finalize ─► END
                                │                           └─ done ───────────────► synthesizer ─┬─► END
                                ├─ no steps ─────────────────────────────────────► synthesizer    └─ model error ─► retry
                                ├─ invalid plan / transient model error ─► retry ─► planner (or synthesizer)
                                ├─ context overflow ─► summarize ─► planner (or synthesizer)
                                └─ retries used up / permanent error ────► failure_handler ─► END
begin_turn starts the turn when no input began it (graphs/shared/turns.py).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graphs.plan.nodes import executor, planner, synthesizer
from graphs.plan.routing import (
    route_after_executor,
    route_after_planner,
    route_after_retry,
    route_after_synthesizer,
    route_at_plan_start,
)
from graphs.plan.state import PLAN_TURN_RESET, PlanState
from graphs.shared.changes import changes_only
from graphs.shared.closing import failure_handler, finalize, on_node_error
from graphs.shared.recovery import retry
from graphs.shared.summarize import summarize
from graphs.shared.turns import begin_turn
from graphs.spec import RunSpec


def build_plan_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    graph = StateGraph(PlanState, context_schema=RunSpec)
    graph.set_node_defaults(error_handler=on_node_error)
    graph.add_node("begin_turn", changes_only(begin_turn("plan", PLAN_TURN_RESET)))
    graph.add_node("planner", changes_only(planner))
    graph.add_node("executor", changes_only(executor))
    graph.add_node("synthesizer", changes_only(synthesizer))
    graph.add_node("retry", changes_only(retry))
    graph.add_node("summarize", changes_only(summarize))
    graph.add_node("failure_handler", changes_only(failure_handler))
    graph.add_node("finalize", changes_only(finalize))

    graph.add_edge(START, "begin_turn")
    graph.add_conditional_edges("begin_turn", route_at_plan_start)
    graph.add_conditional_edges("planner", route_after_planner)
    graph.add_conditional_edges("executor", route_after_executor)
    graph.add_conditional_edges("synthesizer", route_after_synthesizer)
    graph.add_conditional_edges("retry", route_after_retry)
    graph.add_conditional_edges("summarize", route_after_retry)
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer)
