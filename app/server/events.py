"""Run events for HTTP: a sink that hands on the `--jsonl` events as dicts, and SSE framing."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from app.service.events import Event, MessageOut, NodeFailed, StateValues, Token, as_json

log = logging.getLogger("waypoint.server")


class EventQueue:
    """A run's events as their wire dicts (app/service/events.py `as_json`), handed to `emit`.
    Tracebacks of internal errors stay in the server log; the client gets the node name only."""

    def __init__(self, emit: Callable[[dict], None]) -> None:
        self._emit_to = emit
        self._partial: list[str] = []

    def emit(self, event: Event) -> None:
        if isinstance(event, MessageOut | StateValues) or (
            isinstance(event, Token) and not event.text
        ):
            return
        if isinstance(event, Token):
            self._partial.append(event.text)
        if isinstance(event, NodeFailed):
            log.error("internal error in node %s:\n%s", event.node, event.traceback)
            data = {
                "event": "error",
                "node": event.node,
                "detail": "internal error in a node; the details are in the server log",
            }
        else:
            data = as_json(event)
        self._emit_to(data)

    def partial_answer(self) -> str:
        return "".join(self._partial)


def sse(event: str, data: object) -> bytes:
    """One Server-Sent Event: `event: <type>` and the JSON data on one line."""
    payload = json.dumps(data, ensure_ascii=False, default=str)
    return f"event: {event}\ndata: {payload}\n\n".encode()
