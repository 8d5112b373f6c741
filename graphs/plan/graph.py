"""Plan-and-Solve (`--strategy plan`): wiring only, it reads like the diagram.

START ─(over budget)─► summarize ─► planner
START ─► planner ─┬─ valid plan ──► executor ─┬─ steps left ─────────► executor
                  │                           ├─ step failed (once) ─► planner (re-plan the rest)
                  │                           ├─ plan continues (once) ► planner (the rest, from results)
                  │                           ├─ budget spent ───────► finalize ─► END
                  │                           └─ done ───────────────► synthesizer ─┬─► END
                  ├─ no steps ─────────────────────────────────────► synthesizer    └─ model error ─► retry
                  ├─ invalid plan / transient model error ─► retry ─► planner (or synthesizer)
                  ├─ context overflow ─► summarize ─► planner (or synthesizer)
                  └─ retries used up / permanent error ────► failure_handler ─► END
The first node to run for a new user message begins the turn (graphs/shared/turns.py).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START

from graphs.plan.nodes import executor, planner, synthesizer
from graphs.plan.routing import (
    route_after_executor,
    route_after_planner,
    route_after_retry,
    route_after_synthesizer,
    route_at_plan_start,
)
from graphs.plan.state import PLAN_TURN_RESET, PlanState
from graphs.shared.edits import edit_safe
from graphs.shared.recovery import retry
from graphs.shared.skeleton import StrategyGraph, strategy_graph
from graphs.shared.summarize import summarize


def build_plan_graph(checkpointer: BaseCheckpointSaver | None = None) -> StrategyGraph:
    graph = strategy_graph(
        PlanState,
        "plan",
        PLAN_TURN_RESET,
        {
            "planner": planner,
            "executor": executor,
            "synthesizer": synthesizer,
            "retry": retry,
            "summarize": summarize,
        },
    )
    graph.add_conditional_edges(START, edit_safe(route_at_plan_start))
    graph.add_conditional_edges("planner", edit_safe(route_after_planner))
    graph.add_conditional_edges("executor", edit_safe(route_after_executor))
    graph.add_conditional_edges("synthesizer", edit_safe(route_after_synthesizer))
    graph.add_conditional_edges("retry", edit_safe(route_after_retry))
    graph.add_conditional_edges("summarize", edit_safe(route_after_retry))
    return graph.compile(checkpointer=checkpointer)
