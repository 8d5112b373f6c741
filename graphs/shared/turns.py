"""`begin_turn`: the first node of every strategy's graph. A new user message that no input began
as a turn (a LangGraph server's client sends just `{"messages": [...]}`) starts one here: the turn
number goes up and every per-turn counter and the strategy's own fields are reset. It is the one
place a turn begins: the application sends just the message too. An input that carries the resets
itself (graphs/strategies.strategy_turn_input, as tests do) has begun the turn: then this node
writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from graphs.shared.live import context_of
from graphs.state import turn_resets


def begin_turn(strategy: str, reset: Mapping[str, Any]) -> Callable[..., dict]:
    """The begin_turn node of `strategy`, whose turns also reset `reset`."""

    def begin_turn(state: dict, runtime: Runtime) -> dict:
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, HumanMessage) or last.id == state.get("turn_message_id"):
            return {}
        started = context_of(runtime).clock()
        turn = state.get("turn", 0) + 1
        return turn_resets(turn, last.id, started) | dict(reset) | {"strategy": strategy}

    return begin_turn
