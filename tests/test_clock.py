"""Tests for the current_time tool and the now_info helper behind it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.config import load_settings
from app.errors import ConfigError
from tools.clock import now, now_info, today
from tools.clock_tool import current_time

pytestmark = pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py


def test_now_info_on_a_fixed_utc_datetime() -> None:
    fixed = datetime(2024, 3, 10, 14, 5, 9, 123456, tzinfo=UTC)
    assert now_info(fixed) == {
        "iso": "2024-03-10T14:05:09+00:00",
        "date": "2024-03-10",
        "time": "14:05:09",
        "weekday": "Sunday",
        "timezone": "UTC",
    }


def test_now_info_keeps_the_zone_of_an_aware_datetime() -> None:
    tokyo = timezone(timedelta(hours=9), "JST")
    info = now_info(datetime(2024, 2, 29, 23, 59, 59, tzinfo=tokyo))
    assert info["iso"] == "2024-02-29T23:59:59+09:00"
    assert info["weekday"] == "Thursday"
    assert info["timezone"] == "JST"


def test_now_info_treats_a_naive_datetime_as_local_time() -> None:
    info = now_info(datetime(2023, 12, 25, 8, 30))
    assert info["date"] == "2023-12-25"
    assert info["time"] == "08:30:00"
    assert info["weekday"] == "Monday"
    assert info["timezone"]


def test_current_time_tool_returns_json_for_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("APP_NOW")
    assert current_time.name == "current_time"
    assert current_time.description == "Get the current local date, time, weekday and time zone."
    assert current_time.args == {}
    before = datetime.now().astimezone()
    info = json.loads(current_time.invoke({}))
    after = datetime.now().astimezone()
    assert set(info) == {"iso", "date", "time", "weekday", "timezone"}
    reported = datetime.fromisoformat(info["iso"])
    assert before.replace(microsecond=0) <= reported <= after
    assert info["date"] == reported.strftime("%Y-%m-%d")
    assert info["time"] == reported.strftime("%H:%M:%S")
    assert info["weekday"] == reported.strftime("%A")
    assert info["timezone"]


def test_app_now_pins_the_clock_the_tools_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_NOW", "2026-12-31T23:59:30+01:00")
    assert now() == datetime(2026, 12, 31, 23, 59, 30, tzinfo=timezone(timedelta(hours=1)))
    assert json.loads(current_time.invoke({}))["iso"] == "2026-12-31T23:59:30+01:00"
    monkeypatch.setenv("APP_NOW", "2028-02-29")  # a date alone is that day's local noon
    assert today().isoformat() == "2028-02-29"
    assert now().hour == 12


def test_a_bad_app_now_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_NOW", "yesterday")
    with pytest.raises(ConfigError, match="APP_NOW='yesterday' is not an ISO 8601 date"):
        load_settings()
