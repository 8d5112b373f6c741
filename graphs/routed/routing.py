"""The routed strategy's routers: the classified path, and the hand-over to the tool loop when a
shortcut did not answer. Once the turn's budget is spent, no tool loop starts: finalize answers."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from graphs.routed.state import RoutedState
from graphs.shared.live import context_of
from graphs.state import END, AgentContext


def route_after_classify(
    state: RoutedState, runtime: Runtime[AgentContext]
) -> Literal["calculator", "small_talk", "tool_loop", "finalize"]:
    route = state.get("route") or {}
    if route.get("path") == "small_talk":
        return "small_talk"
    has_calculator = "calculator" in context_of(runtime).tools_by_name
    if route.get("path") == "calculator" and has_calculator and route.get("expression"):
        return "calculator"
    return _tool_loop_or_finalize(state)


def route_after_answer(state: RoutedState) -> Literal["tool_loop", "finalize", "__end__"]:
    """A path that did not answer (a calculator error, a failed model call) hands over."""
    return END if state.get("status") == "answered" else _tool_loop_or_finalize(state)


def _tool_loop_or_finalize(state: RoutedState) -> Literal["tool_loop", "finalize"]:
    return "finalize" if state.get("budget_exhausted") else "tool_loop"
