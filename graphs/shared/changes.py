"""Nodes write only what they change. A state field written with the value it already has changes
nothing, yet the checkpointer stores every write of every step (a row each): a node that returns its
counters unchanged every step (retry_count 0, last_error None, …) costs a turn several rows for
nothing. The messages are always passed on: their reducer decides what a write means."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

ALWAYS_WRITTEN = frozenset({"messages"})


def changes_only(node: Callable[..., Any]) -> Callable[..., Any]:
    """`node`, whose dict updates leave out the fields that equal the state's."""

    @functools.wraps(node)  # LangGraph reads the node's signature (does it take a runtime?)
    def changed(state: Any, *args: Any, **kwargs: Any) -> Any:
        update = node(state, *args, **kwargs)
        if not isinstance(update, dict) or not isinstance(state, dict):
            return update
        return {
            key: value
            for key, value in update.items()
            if key in ALWAYS_WRITTEN or key not in state or state[key] != value
        }

    return changed
