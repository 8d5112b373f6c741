"""The current_time tool: the local date, time, weekday and time zone of the clock (tools/clock.py)
as JSON."""

from __future__ import annotations

import json

from langchain_core.tools import tool
from pydantic import BaseModel

from tools.clock import now_info


class CurrentTimeArgs(BaseModel):
    """current_time takes no arguments."""


@tool("current_time", args_schema=CurrentTimeArgs)
def current_time() -> str:
    """Get the current local date, time, weekday and time zone."""
    return json.dumps(now_info())
