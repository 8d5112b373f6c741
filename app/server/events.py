"""Run events for HTTP: a renderer that emits the `--jsonl` events as dicts, and SSE framing."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from app.render import JsonlRenderer

log = logging.getLogger("waypoint.server")


class EventRenderer(JsonlRenderer):
    """The `--jsonl` renderer with each event handed to `emit` instead of printed. Tracebacks of
    internal errors stay in the server log; the client gets the node name only."""

    def __init__(self, emit: Callable[[dict], None]) -> None:
        super().__init__(out=None)  # type: ignore[arg-type]
        self._emit_to = emit

    def _emit(self, event: dict) -> None:
        if event.get("event") == "error" and "traceback" in event:
            log.error("internal error in node %s:\n%s", event.get("node"), event["traceback"])
            event = {
                "event": "error",
                "node": event.get("node"),
                "detail": "internal error in a node; the details are in the server log",
            }
        self._emit_to(event)


def sse(event: str, data: object) -> bytes:
    """One Server-Sent Event: `event: <type>` and the JSON data on one line."""
    payload = json.dumps(data, ensure_ascii=False, default=str)
    return f"event: {event}\ndata: {payload}\n\n".encode()
