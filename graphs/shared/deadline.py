"""The turn's time budget (`--max-seconds`) as a deadline that every model request of a run honours.

A run sets it (`model_deadline`); a model client reads `seconds_left()` to shorten its request
timeout, so a stalled endpoint cannot hold a turn past its budget (app/models/openai_compat.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from graphs.state import AgentContext

# A time.monotonic() instant. LangGraph runs each task in a copy of the caller's context, so a value
# set around a run (or a node's model call) reaches the model client inside it.
_DEADLINE: ContextVar[float | None] = ContextVar("waypoint_model_deadline", default=None)


class TurnTimeSpentError(TimeoutError):
    """Raised by a model client asked to start (or go on with) a request after the turn's time
    budget ran out. A TimeoutError, so it is classified as a transient timeout; the routers then
    see the spent budget and end the turn in `finalize`."""


@contextlib.contextmanager
def model_deadline(seconds: float | None, *, replace: bool = False) -> Iterator[None]:
    """Model requests inside the block end within `seconds` (None: no limit of its own). A nested
    deadline never extends an outer one, unless `replace` (finalize's short last answer)."""
    if seconds is None:
        yield
        return
    deadline = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(deadline if outer is None or replace else min(outer, deadline))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def start_deadline(seconds: float | None) -> None:
    """`model_deadline` for the rest of the calling thread: for a thread that runs one graph run."""
    if seconds is not None:
        _DEADLINE.set(time.monotonic() + seconds)


def seconds_left() -> float | None:
    """Seconds until the current deadline (negative once it passed), or None without one."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def turn_seconds_left(values: Mapping[str, Any], context: AgentContext) -> float | None:
    """What is left of the turn's time budget, from a state (or a turn's input) and the limits."""
    started = values.get("turn_started_at")
    if context.max_seconds is None or started is None:
        return None
    return started + context.max_seconds - context.clock()
