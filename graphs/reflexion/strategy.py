"""Reflexion as a strategy (graphs/catalog.py finds it by this module's name)."""

from __future__ import annotations

from graphs.catalog import Strategy
from graphs.reflexion.graph import build_reflexion_graph
from graphs.reflexion.state import REFLEXION_TURN_RESET

STRATEGY = Strategy(
    name="reflexion",
    graph_id="waypoint-reflexion",
    summary="attempt, evaluate, reflect, attempt again with the lessons",
    build=build_reflexion_graph,
    turn_reset=REFLEXION_TURN_RESET,
    subgraph_nodes=("attempt",),
)
