"""Where a turn begins: in the first node that runs for a new user message, in every strategy.

A new user message that no input began as a turn (a LangGraph server's client sends just
`{"messages": [...]}`, and so does the application) starts one: the turn number goes up and every
per-turn counter and the strategy's own fields are reset. Every node of a strategy's graph (and its
node error handler) is wrapped by `begins_turn`: the first of them to run in a turn sees the state
with the resets applied and writes them with its own update, so beginning a turn costs no step (and
no checkpoint) of its own. Any later node finds the turn begun (`turn_message_id` is the message's
id) and runs as it is. An input that carries the resets itself (graphs/strategies.strategy_turn_input,
as tests do) has begun the turn: then no node adds anything."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import get_runtime
from langgraph.types import Command

from graphs.shared.live import context_of
from graphs.state import turn_resets

TurnStart = Callable[[Mapping[str, Any]], dict]


def turn_start(strategy: str, reset: Mapping[str, Any]) -> TurnStart:
    """What begins a turn of `strategy` (whose turns also reset `reset`) in a given state: the
    resets for a new user message, nothing when the turn has begun or there is no new message."""

    def start(state: Mapping[str, Any]) -> dict:
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, HumanMessage) or last.id == state.get("turn_message_id"):
            return {}
        started = context_of(get_runtime()).clock()
        turn = state.get("turn", 0) + 1
        return turn_resets(turn, last.id, started) | dict(reset) | {"strategy": strategy}

    return start


def begins_turn(node: Callable[..., Any], start: TurnStart) -> Callable[..., Any]:
    """`node`, which begins the turn first when it is the turn's first node: it runs on the state
    with the resets applied, and its update (a dict or a Command) carries them under its own."""

    @functools.wraps(node)  # LangGraph reads the node's signature (does it take a runtime?)
    def run(state: Any, *args: Any, **kwargs: Any) -> Any:
        resets = start(state) if isinstance(state, dict) else {}
        if not resets:
            return node(state, *args, **kwargs)
        return with_resets(node({**state, **resets}, *args, **kwargs), resets)

    return run


def with_resets(update: Any, resets: dict) -> Any:
    """A node's update with the turn's resets under it (the node's own values win)."""
    if isinstance(update, Command):
        return dataclasses.replace(update, update=resets | dict(update.update or {}))
    if isinstance(update, dict):
        return resets | update
    if update is None:
        return resets
    raise TypeError(f"a node's update must be a dict or a Command, not {type(update).__name__}")
