"""The graph factory `langgraph.json` names for `langgraph dev` / LangGraph Studio.

The LangGraph server brings its own checkpointer, so the graph is compiled without one. Runs need
an `AgentContext` (model and tools objects), which Studio cannot send as JSON: use Studio to view
the graph and inspect threads, and `python -m app serve` to run the agent over HTTP.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from graphs.react.graph import build_graph


def make_graph(config: RunnableConfig | None = None) -> CompiledStateGraph:
    return build_graph()
