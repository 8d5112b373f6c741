"""Offline weather: city lookup, deterministic forecasts from bundled climate normals, get_weather.

Forecasts are synthetic but stable: the same city and date always give the same reading.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.tools import tool
from pydantic import BaseModel, Field

from tools import clock
from tools.errors import ToolInputError, ToolNotFoundError

DATA_FILE = Path(__file__).parent / "data" / "weather_cities.json"
UNITS = ("celsius", "fahrenheit")
DAYS_BACK = 30
DAYS_AHEAD = 14
SOURCE = "offline dataset"

# A perturbation of at most 3.5 °C keeps the rounded high within 4 °C of the normal.
_MAX_OFFSET = 3.5
_SNOWY_TO_WET = {"snow": "rain", "light snow": "light rain", "sleet": "light rain"}
# Above this low (°C) snow is implausible, so snowy conditions fall back to rain.
_SNOW_MAX_LOW = 1
_DATE_FORMS = "'today', 'tomorrow' or a date as YYYY-MM-DD"
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# Short upper-case aliases ("LA", "SF") are only spotted in free text with their exact case,
# so ordinary words such as "la" in "la la land" are not read as cities.
_ACRONYM = re.compile(r"[A-Z]{2,4}")


@dataclass(frozen=True)
class MonthlyNormal:
    """Climate normal for one calendar month: mean daily high and low (°C), typical conditions."""

    high: float
    low: float
    conditions: tuple[str, ...]


@dataclass(frozen=True)
class City:
    """A city in the offline dataset; `climate[0]` is January."""

    name: str
    name_zh: str
    aliases: tuple[str, ...]
    country: str
    latitude: float
    longitude: float
    hemisphere: Literal["north", "south"]
    climate: tuple[MonthlyNormal, ...]

    def normal_for(self, day: datetime.date) -> MonthlyNormal:
        return self.climate[day.month - 1]


def _fold(text: str) -> str:
    """Strip accents and compatibility forms so "Reykjavík" and "Reykjavik" compare equal."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _key(text: str) -> str:
    """Lookup key: folded, lower-case, letters and digits only."""
    return "".join(ch for ch in _fold(text).casefold() if ch.isalnum())


def _parse_city(raw: dict[str, Any]) -> City:
    climate = tuple(
        MonthlyNormal(float(m["high"]), float(m["low"]), tuple(m["conditions"]))
        for m in sorted(raw["climate"], key=lambda m: m["month"])
    )
    if len(climate) != 12 or any(m.low >= m.high or not m.conditions for m in climate):
        raise ValueError(f"bad climate normals for {raw['name']!r} in {DATA_FILE}")
    return City(
        name=raw["name"],
        name_zh=raw["name_zh"],
        aliases=tuple(raw.get("aliases", ())),
        country=raw["country"],
        latitude=float(raw["latitude"]),
        longitude=float(raw["longitude"]),
        hemisphere=raw["hemisphere"],
        climate=climate,
    )


@functools.cache
def cities() -> tuple[City, ...]:
    """Every city in the dataset, in file order."""
    data = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return tuple(_parse_city(raw) for raw in data["cities"])


@functools.cache
def _index() -> dict[str, City]:
    index: dict[str, City] = {}
    for city in cities():
        surfaces = [city.name, city.name_zh, *city.aliases, f"{city.name} {city.country}"]
        for surface in surfaces:
            key = _key(surface)
            if index.setdefault(key, city) is not city:
                raise ValueError(f"{surface!r} names both {index[key].name} and {city.name}")
    return index


def supported_cities() -> str:
    """The supported cities as "Paris (巴黎), London (伦敦), ..." for error messages."""
    return ", ".join(f"{c.name} ({c.name_zh})" for c in cities())


def resolve_city(name: str) -> City:
    """Find a city by English name, Chinese name or alias, ignoring case, spaces and punctuation.

    Raises ToolInputError for a blank name and ToolNotFoundError for a city not in the dataset.
    """
    key = _key(name)
    if not key:
        raise ToolInputError(
            f"no city given; pick one of the supported cities: {supported_cities()}"
        )
    city = _index().get(key)
    if city is None:
        raise ToolNotFoundError(
            f"city {name.strip()!r} is not in the offline weather dataset; "
            f"pick one of the supported cities: {supported_cities()}"
        )
    return city


def city_names() -> list[tuple[str, str]]:
    """Every (surface name, canonical English name) pair: English names, Chinese names, aliases."""
    return [
        (surface, city.name)
        for city in cities()
        for surface in (city.name, city.name_zh, *city.aliases)
    ]


def _surface_pattern(surface: str) -> str:
    folded = _fold(surface)
    if _CJK.search(folded):
        return re.escape(folded)
    words = re.findall(r"[A-Za-z0-9]+", folded)
    body = r"[\s\-'’.]*".join(re.escape(w) for w in words)
    if _ACRONYM.fullmatch(folded):
        body = f"(?-i:{body})"
    return rf"(?<![A-Za-z0-9]){body}(?![A-Za-z0-9])"


@functools.cache
def _mention_pattern() -> tuple[re.Pattern[str], dict[str, str]]:
    """One alternation, longest surfaces first, so "New York City" wins over "New York"."""
    groups: dict[str, str] = {}
    parts: list[str] = []
    pairs = sorted(city_names(), key=lambda pair: len(_fold(pair[0])), reverse=True)
    for i, (surface, canonical) in enumerate(pairs):
        groups[f"c{i}"] = canonical
        parts.append(f"(?P<c{i}>{_surface_pattern(surface)})")
    return re.compile("|".join(parts), re.IGNORECASE), groups


def find_cities(text: str) -> list[str]:
    """Canonical English names of the cities mentioned in free text, in order of first mention.

    English names match whole words, ignoring case; Chinese names match as substrings.
    """
    pattern, groups = _mention_pattern()
    found: list[str] = []
    for match in pattern.finditer(_fold(text)):
        name = groups[match.lastgroup or ""]
        if name not in found:
            found.append(name)
    return found


def resolve_date(
    date: str,
    today: datetime.date,
    *,
    days_back: int = DAYS_BACK,
    days_ahead: int = DAYS_AHEAD,
    coverage: str = "the supported range is",
) -> datetime.date:
    """'today', 'tomorrow' or YYYY-MM-DD, within [today - days_back, today + days_ahead]."""
    text = date.strip().lower()
    if text == "today":
        day = today
    elif text == "tomorrow":
        day = today + datetime.timedelta(days=1)
    else:
        try:
            if not _ISO_DATE.fullmatch(text):
                raise ValueError(text)
            day = datetime.date.fromisoformat(text)
        except ValueError:
            raise ToolInputError(f"date {date!r} is not understood; use {_DATE_FORMS}") from None
    first = today - datetime.timedelta(days=days_back)
    last = today + datetime.timedelta(days=days_ahead)
    if not first <= day <= last:
        raise ToolNotFoundError(
            f"no weather for {day.isoformat()}: {coverage} {first.isoformat()} "
            f"to {last.isoformat()} ({days_back} days back, {days_ahead} days ahead); "
            f"use {_DATE_FORMS} within that range"
        )
    return day


def _unit_fractions(city: City, day: datetime.date) -> tuple[float, float, int]:
    """Two floats in [0, 1) and an int, stable across processes (unlike the built-in hash)."""
    digest = hashlib.sha256(f"{city.name}|{day.isoformat()}".encode()).digest()
    first = int.from_bytes(digest[0:4], "big") / 2**32
    second = int.from_bytes(digest[4:8], "big") / 2**32
    return first, second, int.from_bytes(digest[8:12], "big")


def _to_fahrenheit(celsius: int) -> int:
    return round(celsius * 9 / 5 + 32)


def forecast(
    city: str,
    unit: str = "celsius",
    date: str = "today",
    today: datetime.date | None = None,
) -> dict[str, Any]:
    """The offline forecast for one city and day.

    `date` is "today", "tomorrow" or YYYY-MM-DD, from 30 days before `today` to 14 days after;
    `today` defaults to `tools.clock.today()` (APP_NOW pins it). Returns city, city_zh, date (ISO), condition,
    high, low (ints, high > low), unit and source.
    """
    unit_key = unit.strip().lower()
    if unit_key not in UNITS:
        raise ToolInputError(f"unit {unit!r} is not supported; use 'celsius' or 'fahrenheit'")
    found = resolve_city(city)
    day = resolve_date(date, today or clock.today())
    normal = found.normal_for(day)
    first, second, pick = _unit_fractions(found, day)
    high_offset = (2 * first - 1) * _MAX_OFFSET
    # Lows follow the day's highs half-way, plus their own smaller wobble.
    low_offset = high_offset / 2 + (2 * second - 1) * _MAX_OFFSET / 2
    high = round(normal.high + high_offset)
    low = min(round(normal.low + low_offset), high - 1)
    condition = normal.conditions[pick % len(normal.conditions)]
    if low > _SNOW_MAX_LOW:
        condition = _SNOWY_TO_WET.get(condition, condition)
    if unit_key == "fahrenheit":
        high, low = _to_fahrenheit(high), _to_fahrenheit(low)
    return {
        "city": found.name,
        "city_zh": found.name_zh,
        "date": day.isoformat(),
        "condition": condition,
        "high": high,
        "low": low,
        "unit": unit_key,
        "source": SOURCE,
    }


class WeatherArgs(BaseModel):
    """Arguments of get_weather."""

    city: str = Field(
        description="City name in English or Chinese, e.g. 'Paris', 'New York' or '北京'."
    )
    unit: Literal["celsius", "fahrenheit"] = Field(
        default="celsius", description="Temperature unit: 'celsius' or 'fahrenheit'."
    )
    date: str = Field(
        default="today",
        description="'today', 'tomorrow' or a date as YYYY-MM-DD "
        "(from 30 days ago to 14 days ahead).",
    )


@tool(args_schema=WeatherArgs)
def get_weather(
    city: str, unit: Literal["celsius", "fahrenheit"] = "celsius", date: str = "today"
) -> str:
    """Get the weather (high, low, condition) for one city today, tomorrow or on a date (YYYY-MM-DD)."""
    return json.dumps(forecast(city, unit=unit, date=date), ensure_ascii=False)
