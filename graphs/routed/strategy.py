"""Classify-then-route as a strategy (graphs/catalog.py finds it by this module's name)."""

from __future__ import annotations

from graphs.catalog import Strategy
from graphs.routed.graph import build_routed_graph
from graphs.routed.state import ROUTED_TURN_RESET

STRATEGY = Strategy(
    name="routed",
    graph_id="waypoint-routed",
    summary="classify first: arithmetic to the calculator, small talk to an answer",
    build=build_routed_graph,
    turn_reset=ROUTED_TURN_RESET,
    subgraph_nodes=("tool_loop",),
)
