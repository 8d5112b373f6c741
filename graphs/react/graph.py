"""The react strategy's graph, the tool loop: wiring only, it reads like the diagram.

START ─┬─ over the context budget ─► summarize ─► agent
       └───────────────────────────────────────► agent
agent ─┬─ tool calls ─────────────────────► tools ─┬─ all ok ──────────────────────► agent
       │                                           ├─ tool error ──────────────────► retry ─► agent
       │                                           ├─ tool error, retries used up ─► failure_handler
       │                                           └─ step/time/token budget spent ─► finalize
       ├─ transient model error ──────────► retry ─► agent
       ├─ context overflow, older turns ──► summarize ─► agent
       ├─ permanent error / retries used up ─────────────► failure_handler ─► END
       ├─ budget spent or repeated identical call ───────► finalize ───────► END
       └─ plain answer ──────────────────────────────────► END
a bug in any node ─► (node error handler) ─► failure_handler   (a bug in failure_handler ─► END)
The first node to run for a new user message begins the turn (graphs/shared/turns.py).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START

from graphs.react.nodes import agent, tools
from graphs.react.routing import route_after_agent, route_after_tools, route_at_start
from graphs.shared.edits import edit_safe
from graphs.shared.recovery import retry
from graphs.shared.skeleton import StrategyGraph, strategy_graph
from graphs.shared.summarize import summarize
from graphs.state import AgentContext, AgentState


def build_graph(checkpointer: BaseCheckpointSaver | None = None) -> StrategyGraph:
    graph = strategy_graph(
        AgentState,
        "react",
        {},
        {"agent": agent, "tools": tools, "retry": retry, "summarize": summarize},
    )
    graph.add_conditional_edges(START, edit_safe(route_at_start))
    graph.add_conditional_edges("agent", edit_safe(route_after_agent))
    graph.add_conditional_edges("tools", edit_safe(route_after_tools))
    graph.add_edge("retry", "agent")
    graph.add_edge("summarize", "agent")
    return graph.compile(checkpointer=checkpointer)


def recursion_limit(context: AgentContext) -> int:
    """A backstop far above any legal path: every model call may be followed by tools and a retry."""
    return 4 * (context.max_iterations + context.max_retries) + 10
