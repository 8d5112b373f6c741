"""The tool loop as a strategy (graphs/catalog.py finds it by this module's name)."""

from __future__ import annotations

from langchain_core.messages import ToolCall

from graphs.catalog import Strategy
from graphs.react.graph import build_graph


def _calls_of_last_message(values: dict) -> list[ToolCall]:
    return list(values["messages"][-1].tool_calls)


STRATEGY = Strategy(
    name="react",
    graph_id="waypoint",
    summary="the tool loop: one model step at a time",
    build=build_graph,
    replay_gate="tools",
    gate_calls=_calls_of_last_message,
)
