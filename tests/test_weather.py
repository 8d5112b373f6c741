"""Tests for the offline weather tool: dataset, city lookup, forecasts and get_weather."""

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools import clock
from tools.errors import ToolError, ToolInputError, ToolNotFoundError
from tools.weather import (
    City,
    cities,
    city_names,
    find_cities,
    forecast,
    get_weather,
    resolve_city,
)

pytestmark = pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py

TODAY = datetime.date(2025, 3, 15)
KEYS = {"city", "city_zh", "date", "condition", "high", "low", "unit", "source"}
REQUIRED = {
    "Paris": "巴黎",
    "London": "伦敦",
    "Tokyo": "东京",
    "Beijing": "北京",
    "Shanghai": "上海",
    "New York": "纽约",
    "San Francisco": "旧金山",
    "Berlin": "柏林",
    "Sydney": "悉尼",
    "Moscow": "莫斯科",
    "Singapore": "新加坡",
    "Hong Kong": "香港",
    "Shenzhen": "深圳",
    "Guangzhou": "广州",
    "Seoul": "首尔",
    "Los Angeles": "洛杉矶",
    "Chicago": "芝加哥",
    "Toronto": "多伦多",
    "Rome": "罗马",
    "Madrid": "马德里",
    "Cairo": "开罗",
    "Dubai": "迪拜",
    "Mumbai": "孟买",
    "Bangkok": "曼谷",
    "Rio de Janeiro": "里约热内卢",
    "Mexico City": "墨西哥城",
    "Istanbul": "伊斯坦布尔",
    "Amsterdam": "阿姆斯特丹",
    "Vienna": "维也纳",
    "Stockholm": "斯德哥尔摩",
    "Nairobi": "内罗毕",
    "Buenos Aires": "布宜诺斯艾利斯",
    "Chengdu": "成都",
    "Hangzhou": "杭州",
    "Reykjavik": "雷克雅未克",
    "Cape Town": "开普敦",
}
ALL_NAMES = [c.name for c in cities()]
# Every day in the supported window around TODAY, so month-boundaries and both ends are covered.
WINDOW = [TODAY + datetime.timedelta(days=n) for n in range(-30, 15)]


def test_dataset_has_at_least_36_cities_including_the_required_ones():
    assert len(cities()) >= 36
    assert {c.name: c.name_zh for c in cities() if c.name in REQUIRED} == REQUIRED


def test_every_city_has_sane_monthly_normals_and_metadata():
    for city in cities():
        assert len(city.climate) == 12, city.name
        assert city.country, city.name
        assert city.hemisphere == ("north" if city.latitude >= 0 else "south"), city.name
        for month in city.climate:
            assert -30 < month.low < month.high < 50, city.name
            assert month.conditions, city.name


def test_southern_hemisphere_summer_is_in_january():
    sydney = resolve_city("Sydney")
    moscow = resolve_city("Moscow")
    assert sydney.climate[0].high > sydney.climate[6].high
    assert moscow.climate[6].high > moscow.climate[0].high


@pytest.mark.parametrize("name", ALL_NAMES)
def test_each_city_resolves_by_english_and_chinese_name(name: str):
    city = resolve_city(name)
    assert isinstance(city, City)
    assert city.name == name
    assert resolve_city(city.name_zh) == city


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("  paris ", "Paris"),
        ("NEW YORK", "New York"),
        ("new-york", "New York"),
        ("San  Francisco!", "San Francisco"),
        ("NYC", "New York"),
        ("sf", "San Francisco"),
        ("LA", "Los Angeles"),
        ("Peking", "Beijing"),
        ("北京市", "Beijing"),
        (" 上海 ", "Shanghai"),
        ("xian", "Xi'an"),
        ("Reykjavík", "Reykjavik"),
        ("Paris, France", "Paris"),
    ],
)
def test_resolve_city_tolerates_case_spacing_punctuation_and_aliases(query: str, expected: str):
    assert resolve_city(query).name == expected


def test_unknown_city_error_names_the_city_and_lists_supported_cities():
    with pytest.raises(ToolNotFoundError) as info:
        resolve_city("Atlantis")
    message = str(info.value)
    assert "Atlantis" in message
    assert "pick one" in message
    for city in cities():
        assert city.name in message
        assert city.name_zh in message


def test_blank_city_is_an_input_error_listing_cities():
    with pytest.raises(ToolInputError, match="Paris"):
        resolve_city("  ")


def test_city_names_covers_english_chinese_and_aliases():
    pairs = set(city_names())
    assert ("Paris", "Paris") in pairs
    assert ("巴黎", "Paris") in pairs
    assert ("NYC", "New York") in pairs
    assert ("Peking", "Beijing") in pairs
    assert {canonical for _, canonical in pairs} == set(ALL_NAMES)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What's the weather in Paris and London tomorrow?", ["Paris", "London"]),
        ("北京和上海的天气怎么样", ["Beijing", "Shanghai"]),
        ("compare new york with tokyo", ["New York", "Tokyo"]),
        ("London, then Paris, then london again", ["London", "Paris"]),
        ("New York City vs NYC vs 纽约市", ["New York"]),
        ("上海和Paris的天气", ["Shanghai", "Paris"]),
        ("Is it raining in Rio de Janeiro or Rio?", ["Rio de Janeiro"]),
        ("weather in Reykjavík and xi'an", ["Reykjavik", "Xi'an"]),
        ("flying SF to LA", ["San Francisco", "Los Angeles"]),
        ("no cities here: la la land, parisian cafes, tokyoite", []),
    ],
)
def test_find_cities_returns_canonical_names_in_order_of_first_mention(
    text: str, expected: list[str]
):
    assert find_cities(text) == expected


def test_forecast_has_the_documented_shape():
    result = forecast("Paris", today=TODAY)
    assert set(result) == KEYS
    assert result["city"] == "Paris"
    assert result["city_zh"] == "巴黎"
    assert result["date"] == TODAY.isoformat()
    assert result["unit"] == "celsius"
    assert result["source"] == "offline dataset"
    assert isinstance(result["high"], int)
    assert isinstance(result["low"], int)


def test_forecast_is_deterministic_and_independent_of_the_surface_name():
    first = forecast("Tokyo", date="2025-03-20", today=TODAY)
    assert forecast("Tokyo", date="2025-03-20", today=TODAY) == first
    assert forecast("东京", date="2025-03-20", today=TODAY) == first
    # The reading belongs to the date, not to the day it was asked.
    assert forecast("tokyo", date="2025-03-20", today=TODAY + datetime.timedelta(days=3)) == first


def test_forecast_is_stable_across_processes_with_different_hash_seeds():
    script = (
        "import datetime, json; from tools.weather import forecast; "
        "print(json.dumps(forecast('Berlin', date='2025-03-01', today=datetime.date(2025, 3, 15))))"
    )
    root = Path(__file__).resolve().parents[1]
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    in_process = forecast("Berlin", date="2025-03-01", today=TODAY)
    assert json.loads(outputs.pop()) == in_process


def test_forecasts_vary_across_a_month():
    results = [forecast("London", date=day.isoformat(), today=TODAY) for day in WINDOW[:30]]
    assert len({r["high"] for r in results}) > 1
    assert len({r["low"] for r in results}) > 1
    assert len({r["condition"] for r in results}) > 1


def test_different_cities_get_different_readings_on_the_same_days():
    days = [day.isoformat() for day in WINDOW[:10]]
    paris = [forecast("Paris", date=d, today=TODAY)["high"] for d in days]
    amsterdam = [forecast("Amsterdam", date=d, today=TODAY)["high"] for d in days]
    assert paris != amsterdam


@pytest.mark.parametrize("name", ALL_NAMES)
def test_readings_stay_near_the_monthly_normal(name: str):
    city = resolve_city(name)
    for day in WINDOW:
        result = forecast(name, date=day.isoformat(), today=TODAY)
        normal = city.climate[day.month - 1]
        assert abs(result["high"] - normal.high) <= 4, (name, day)
        assert result["low"] < result["high"], (name, day)
        assert result["condition"] in normal.conditions or result["condition"] in {
            "rain",
            "light rain",
        }, (name, day)


def test_snow_is_never_reported_on_a_mild_day():
    for city in cities():
        for day in WINDOW:
            result = forecast(city.name, date=day.isoformat(), today=TODAY)
            if result["low"] > 1:
                assert result["condition"] not in {"snow", "light snow", "sleet"}, (city.name, day)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_fahrenheit_matches_celsius_for_the_same_city_and_date(name: str):
    for day in WINDOW[::7]:
        celsius = forecast(name, date=day.isoformat(), today=TODAY)
        fahrenheit = forecast(name, unit="fahrenheit", date=day.isoformat(), today=TODAY)
        assert fahrenheit["unit"] == "fahrenheit"
        assert fahrenheit["high"] == round(celsius["high"] * 9 / 5 + 32)
        assert fahrenheit["low"] == round(celsius["low"] * 9 / 5 + 32)
        assert fahrenheit["low"] < fahrenheit["high"]
        assert fahrenheit["condition"] == celsius["condition"]
        assert fahrenheit["date"] == celsius["date"]


def test_unit_is_case_insensitive():
    assert forecast("Paris", unit="Fahrenheit", today=TODAY)["unit"] == "fahrenheit"


def test_unknown_unit_lists_the_supported_units():
    with pytest.raises(ToolInputError) as info:
        forecast("Paris", unit="kelvin", today=TODAY)
    message = str(info.value)
    assert "kelvin" in message
    assert "celsius" in message
    assert "fahrenheit" in message


def test_today_and_tomorrow_equal_the_explicit_iso_dates():
    tomorrow = (TODAY + datetime.timedelta(days=1)).isoformat()
    assert forecast("Seoul", date="tomorrow", today=TODAY) == forecast(
        "Seoul", date=tomorrow, today=TODAY
    )
    assert forecast("Seoul", date="tomorrow", today=TODAY)["date"] == tomorrow
    assert forecast("Seoul", date="Today", today=TODAY) == forecast(
        "Seoul", date=TODAY.isoformat(), today=TODAY
    )


def test_both_ends_of_the_supported_range_are_accepted():
    assert forecast("Cairo", date="2025-02-13", today=TODAY)["date"] == "2025-02-13"
    assert forecast("Cairo", date="2025-03-29", today=TODAY)["date"] == "2025-03-29"


@pytest.mark.parametrize(
    "date",
    [
        "next week",
        "2025/03/16",
        "16-03-2025",
        "2025-3-16",
        "20250316",
        "2025-02-30",
        "",
        "yesterday",
    ],
)
def test_bad_date_formats_name_the_supported_forms(date: str):
    with pytest.raises(ToolInputError) as info:
        forecast("Paris", date=date, today=TODAY)
    message = str(info.value)
    for form in ("today", "tomorrow", "YYYY-MM-DD"):
        assert form in message


@pytest.mark.parametrize("date", ["2025-02-12", "2025-03-30", "2024-03-15"])
def test_out_of_range_dates_name_the_supported_forms_and_range(date: str):
    with pytest.raises(ToolNotFoundError) as info:
        forecast("Paris", date=date, today=TODAY)
    message = str(info.value)
    assert date in message
    assert "2025-02-13" in message
    assert "2025-03-29" in message
    for form in ("today", "tomorrow", "YYYY-MM-DD"):
        assert form in message


def test_get_weather_tool_returns_json_with_the_documented_keys():
    tomorrow = (clock.today() + datetime.timedelta(days=1)).isoformat()
    raw = get_weather.invoke({"city": "巴黎", "unit": "fahrenheit", "date": "tomorrow"})
    assert isinstance(raw, str)
    assert "巴黎" in raw  # ensure_ascii=False keeps Chinese readable for the model
    result = json.loads(raw)
    assert set(result) == KEYS
    assert result["city"] == "Paris"
    assert result["date"] == tomorrow
    assert result["unit"] == "fahrenheit"
    assert result == forecast("Paris", unit="fahrenheit", date=tomorrow)


def test_get_weather_tool_uses_the_clocks_date_by_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("APP_NOW", "2028-02-29T23:59:59+00:00")
    result = json.loads(get_weather.invoke({"city": "London"}))
    assert result["date"] == "2028-02-29"
    assert result["unit"] == "celsius"


def test_get_weather_tool_metadata_is_what_the_model_reads():
    assert get_weather.name == "get_weather"
    assert get_weather.description.splitlines()[0] == (
        "Get the weather (high, low, condition) for one city today, tomorrow or on a date "
        "(YYYY-MM-DD)."
    )
    args = get_weather.args
    assert set(args) == {"city", "unit", "date"}
    assert args["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert all(spec.get("description") for spec in args.values())


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"city": "Atlantis"}, ToolNotFoundError),
        ({"city": "Paris", "date": "someday"}, ToolInputError),
        ({"city": "Paris", "date": "1999-01-01"}, ToolNotFoundError),
    ],
)
def test_get_weather_tool_lets_tool_errors_propagate(payload: dict, error: type[ToolError]):
    with pytest.raises(error):
        get_weather.invoke(payload)


def test_find_cities_prefers_the_longest_overlapping_name(monkeypatch: pytest.MonkeyPatch):
    import tools.weather as weather

    # Fake cities whose names overlap "New York": one inside it, one sharing its start.
    real_names = weather.city_names
    fakes = [("York", "York"), ("New", "New")]
    monkeypatch.setattr(weather, "city_names", lambda: [*fakes, *real_names()])
    weather._mention_pattern.cache_clear()
    try:
        assert find_cities("New York or York?") == ["New York", "York"]
        assert find_cities("new york, new") == ["New York", "New"]
    finally:
        monkeypatch.undo()
        weather._mention_pattern.cache_clear()


def test_low_is_below_high_for_every_city_on_every_day_of_a_year():
    # A full year reaches the rare days where the perturbed low would meet the high.
    year = [datetime.date(2025, 1, 1) + datetime.timedelta(days=n) for n in range(365)]
    for city in cities():
        for day in year:
            result = forecast(city.name, today=day)
            assert result["low"] < result["high"], (city.name, day)
