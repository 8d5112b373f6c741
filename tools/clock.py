"""The one clock the tools read (pinned by APP_NOW for reproducible runs and tests). It imports no
LangChain: the configuration reads APP_NOW through it in every command (the current_time tool is in
tools/clock_tool.py)."""

from __future__ import annotations

import os
from datetime import date, datetime

# Not strftime("%A"): that follows the process locale, and the model expects English names.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


PIN_VARIABLE = "APP_NOW"


def parse_pin(text: str) -> datetime:
    """An APP_NOW value: ISO 8601, a date alone meaning its noon; without an offset, local time."""
    value = text.strip()
    try:
        moment = datetime.fromisoformat(f"{value}T12:00:00" if len(value) == 10 else value)
    except ValueError:
        raise ValueError(
            f"{PIN_VARIABLE}={text!r} is not an ISO 8601 date or time; "
            "use e.g. 2026-12-31 or 2026-12-31T23:59:00+01:00, or unset it"
        ) from None
    return moment if moment.tzinfo else moment.astimezone()


def now() -> datetime:
    """The current local time (aware), or the instant APP_NOW pins."""
    pinned = os.environ.get(PIN_VARIABLE)
    return parse_pin(pinned) if pinned else datetime.now().astimezone()


def today() -> date:
    """The date of `now()`: what 'today' means to the weather tools."""
    return now().date()


def now_info(moment: datetime | None = None) -> dict[str, str]:
    """Describe ``moment`` (default: `now()`) as iso, date, time, weekday, timezone.

    A naive ``moment`` is taken as local time; an aware one keeps its own zone.
    """
    moment = now() if moment is None else moment
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return {
        "iso": moment.isoformat(timespec="seconds"),
        "date": moment.strftime("%Y-%m-%d"),
        "time": moment.strftime("%H:%M:%S"),
        "weekday": _WEEKDAYS[moment.weekday()],
        "timezone": moment.tzname() or moment.strftime("%z"),
    }
