"""The current_time tool: the local date, time, weekday and time zone as JSON."""

from __future__ import annotations

import json
from datetime import datetime

from langchain_core.tools import tool
from pydantic import BaseModel

# Not strftime("%A"): that follows the process locale, and the model expects English names.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def now_info(now: datetime | None = None) -> dict[str, str]:
    """Describe ``now`` (default: the current local time) as iso, date, time, weekday, timezone.

    A naive ``now`` is taken as local time; an aware one keeps its own zone, so tests can pin it.
    """
    if now is None:
        now = datetime.now()
    if now.tzinfo is None:
        now = now.astimezone()
    return {
        "iso": now.isoformat(timespec="seconds"),
        "date": now.strftime("%Y-%m-%d"),
        "time": now.strftime("%H:%M:%S"),
        "weekday": _WEEKDAYS[now.weekday()],
        "timezone": now.tzname() or now.strftime("%z"),
    }


class CurrentTimeArgs(BaseModel):
    """current_time takes no arguments."""


@tool("current_time", args_schema=CurrentTimeArgs)
def current_time() -> str:
    """Get the current local date, time, weekday and time zone."""
    return json.dumps(now_info())
