"""Plan-and-Solve as a strategy (graphs/catalog.py finds it by this module's name)."""

from __future__ import annotations

from graphs.catalog import Strategy
from graphs.plan.graph import build_plan_graph
from graphs.plan.nodes import next_step_calls
from graphs.plan.state import PLAN_TURN_RESET

STRATEGY = Strategy(
    name="plan",
    graph_id="waypoint-plan",
    summary="Plan-and-Solve: a whole plan, executed step by step, then an answer",
    build=build_plan_graph,
    turn_reset=PLAN_TURN_RESET,
    replay_gate="executor",
    gate_calls=next_step_calls,
)
