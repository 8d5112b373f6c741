"""Server-Sent Events framing."""

from __future__ import annotations

import json


def sse(event: str, data: object) -> bytes:
    """One Server-Sent Event: `event: <type>` and the JSON data on one line."""
    payload = json.dumps(data, ensure_ascii=False, default=str)
    return f"event: {event}\ndata: {payload}\n\n".encode()
