"""Opt-in online weather from Open-Meteo (no API key), behind the same get_weather name and schema.

`make_weather_tool` picks the backend: "offline" (the bundled dataset) or "open-meteo".
"""

from __future__ import annotations

import datetime
import json
import math
import os
from typing import Any, Literal, Protocol

from langchain_core.tools import BaseTool, StructuredTool

from tools import clock
from tools.errors import ToolError, ToolInputError
from tools.weather import UNITS, WeatherArgs, get_weather, resolve_city, resolve_date

BACKENDS = ("offline", "open-meteo")
DEFAULT_BASE_URL = "https://api.open-meteo.com"
DEFAULT_TIMEOUT = 5.0
SOURCE = "open-meteo"
# The forecast API serves 16 days (today and 15 more); the past window matches the offline tool.
DAYS_BACK = 30
DAYS_AHEAD = 15
DAILY_FIELDS = ("temperature_2m_max", "temperature_2m_min", "weathercode")

# WMO weather interpretation codes (the `weathercode` Open-Meteo returns), in the dataset's words.
WMO_CONDITIONS: dict[int, str] = {
    0: "clear",
    1: "sunny",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "fog",
    51: "drizzle",
    53: "drizzle",
    55: "drizzle",
    56: "drizzle",
    57: "sleet",
    61: "light rain",
    63: "rain",
    65: "heavy rain",
    66: "sleet",
    67: "sleet",
    71: "light snow",
    73: "snow",
    75: "snow",
    77: "light snow",
    80: "showers",
    81: "showers",
    82: "heavy rain",
    85: "light snow",
    86: "snow",
    95: "thunderstorms",
    96: "thunderstorms",
    99: "thunderstorms",
}

_FALLBACK = "use the offline dataset (APP_WEATHER_BACKEND=offline)"
_MAX_REASON_CHARS = 200


class WeatherServiceError(ToolError):
    """Raised when the online weather service cannot be reached, fails, or gives an unusable answer."""


class WeatherBackend(Protocol):
    """Anything the online get_weather can ask for one city's reading on one day."""

    def forecast(self, city: str, unit: str = "celsius", date: str = "today") -> dict[str, Any]: ...


class OpenMeteoBackend:
    """Daily forecasts from the Open-Meteo forecast API for the cities of the offline dataset.

    Every call is one GET with `timeout` seconds per network phase (connect, read, write).
    """

    def __init__(self, base_url: str = DEFAULT_BASE_URL, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"weather service URL {base_url!r} must start with http:// or https://"
            )
        if timeout <= 0:
            raise ValueError(f"weather service timeout must be positive, not {timeout}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def forecast(
        self,
        city: str,
        unit: str = "celsius",
        date: str = "today",
        today: datetime.date | None = None,
    ) -> dict[str, Any]:
        """The service's forecast for one city and day, in the offline tool's shape.

        `date` is "today", "tomorrow" or YYYY-MM-DD, from 30 days before `today` to 15 days after;
        `today` defaults to `tools.clock.today()` (APP_NOW pins it). Arguments are checked before any request.
        """
        unit_key = unit.strip().lower()
        if unit_key not in UNITS:
            raise ToolInputError(f"unit {unit!r} is not supported; use 'celsius' or 'fahrenheit'")
        found = resolve_city(city)
        day = _resolve_date(date, today or clock.today())
        payload = self._get(
            {
                "latitude": found.latitude,
                "longitude": found.longitude,
                "daily": ",".join(DAILY_FIELDS),
                "timezone": "auto",
                "start_date": day.isoformat(),
                "end_date": day.isoformat(),
                "temperature_unit": unit_key,
            }
        )
        high, low, code = _daily_reading(payload, day)
        return {
            "city": found.name,
            "city_zh": found.name_zh,
            "date": day.isoformat(),
            "condition": WMO_CONDITIONS[code],
            "high": round(high),
            "low": round(low),
            "unit": unit_key,
            "source": SOURCE,
        }

    def _get(self, params: dict[str, Any]) -> Any:
        try:
            import httpx
        except ImportError:
            raise WeatherServiceError(
                f"the open-meteo weather backend needs the httpx package; install it or {_FALLBACK}"
            ) from None
        try:
            response = httpx.get(
                f"{self.base_url}/v1/forecast",
                params=params,
                timeout=self.timeout,
                follow_redirects=True,
            )
        except httpx.TimeoutException:
            raise WeatherServiceError(
                f"the weather service did not answer in {self.timeout:g} s; try again or {_FALLBACK}"
            ) from None
        except httpx.TransportError as exc:
            raise WeatherServiceError(
                f"could not reach the weather service at {self.base_url} "
                f"({type(exc).__name__}: {exc}); check the network connection or {_FALLBACK}"
            ) from None
        if response.is_client_error:
            raise WeatherServiceError(
                f"the weather service rejected the request (HTTP {response.status_code}: "
                f"{_reason(response)}); {_FALLBACK}"
            )
        if response.is_error:
            raise WeatherServiceError(
                f"the weather service failed (HTTP {response.status_code}: {_reason(response)}); "
                f"try again later or {_FALLBACK}"
            )
        try:
            return response.json()
        except ValueError:
            raise _invalid("the body is not JSON") from None


def _resolve_date(date: str, today: datetime.date) -> datetime.date:
    return resolve_date(
        date,
        today,
        days_back=DAYS_BACK,
        days_ahead=DAYS_AHEAD,
        coverage="the weather service covers",
    )


def _reason(response: Any) -> str:
    """Open-Meteo explains errors as {"error": true, "reason": "..."}; otherwise the status phrase."""
    try:
        reason = response.json().get("reason")
    except (ValueError, AttributeError):
        reason = None
    text = reason if isinstance(reason, str) and reason.strip() else response.reason_phrase
    return " ".join(str(text).split())[:_MAX_REASON_CHARS] or "no reason given"


def _invalid(detail: str) -> WeatherServiceError:
    return WeatherServiceError(
        f"invalid response from the weather service ({detail}); try again or {_FALLBACK}"
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _daily_reading(payload: Any, day: datetime.date) -> tuple[float, float, int]:
    """(high, low, WMO code) for `day` from the `daily` block of a forecast response."""
    try:
        daily = payload["daily"]
        index = daily["time"].index(day.isoformat())
        codes = daily["weathercode"] if "weathercode" in daily else daily["weather_code"]
        raw = (daily["temperature_2m_max"][index], daily["temperature_2m_min"][index], codes[index])
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise _invalid(f"no daily reading for {day.isoformat()}") from None
    high, low, code = (_number(value) for value in raw)
    if high is None or low is None or code is None:
        raise _invalid(f"missing or non-numeric values for {day.isoformat()}")
    if low > high:
        raise _invalid(f"the low {low} is above the high {high}")
    if not code.is_integer() or int(code) not in WMO_CONDITIONS:
        raise _invalid(f"unknown weather code {raw[2]!r}")
    return high, low, int(code)


def make_online_weather_tool(backend: WeatherBackend) -> BaseTool:
    """A get_weather tool on `backend`, with the offline tool's name, description and args schema."""

    def online_weather(
        city: str, unit: Literal["celsius", "fahrenheit"] = "celsius", date: str = "today"
    ) -> str:
        return json.dumps(backend.forecast(city, unit=unit, date=date), ensure_ascii=False)

    return StructuredTool.from_function(
        online_weather,
        name=get_weather.name,
        description=get_weather.description,
        args_schema=WeatherArgs,
    )


def make_weather_tool(backend_name: str) -> BaseTool:
    """The get_weather tool for a backend name in BACKENDS.

    "open-meteo" reads the service URL from APP_WEATHER_URL (default: the public Open-Meteo API).
    Raises ValueError for any other name.
    """
    if backend_name == "offline":
        return get_weather
    if backend_name == "open-meteo":
        base_url = os.environ.get("APP_WEATHER_URL", "").strip() or DEFAULT_BASE_URL
        return make_online_weather_tool(OpenMeteoBackend(base_url=base_url))
    raise ValueError(f"unknown weather backend {backend_name!r}; use one of: {', '.join(BACKENDS)}")
