"""Tests for the Open-Meteo weather backend against a real scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import datetime
import json
import socket
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tools import clock
from tools.errors import ToolError, ToolInputError, ToolNotFoundError
from tools.weather import WeatherArgs, cities, get_weather
from tools.weather_online import (
    DEFAULT_BASE_URL,
    WMO_CONDITIONS,
    OpenMeteoBackend,
    WeatherServiceError,
    make_weather_tool,
)

TODAY = datetime.date(2025, 3, 15)
KEYS = {"city", "city_zh", "date", "condition", "high", "low", "unit", "source"}
HANG = object()


@dataclass
class Reply:
    """One scripted answer: a status and a body (dict → JSON, str → raw text), or HANG."""

    status: int = 200
    body: object = None


@dataclass
class Request:
    path: str
    params: dict[str, str]


@dataclass
class ScriptedServer:
    """Answers each GET with the next scripted reply and records it; unscripted requests get a 599."""

    url: str = ""
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Request] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {key: values[-1] for key, values in parse_qs(parts.query).items()}
            server.requests.append(Request(parts.path, params))
            reply = server.replies.popleft() if server.replies else Reply(599, "unscripted")
            if reply.body is HANG:
                server.release.wait(timeout=10)
                return
            body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            data = body.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours proxy variables, which would send 127.0.0.1 requests elsewhere.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(scripted))
    httpd.daemon_threads = True
    scripted.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    # A short poll interval keeps shutdown (and so each test) fast.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield scripted
    finally:
        scripted.release.set()
        httpd.shutdown()
        httpd.server_close()
    assert not scripted.replies, "scripted replies were left unused"


def daily(
    day: datetime.date = TODAY, high: object = 12.6, low: object = 4.4, code: object = 61
) -> dict:
    """An Open-Meteo forecast body with one daily reading."""
    return {
        "latitude": 48.86,
        "longitude": 2.35,
        "daily_units": {"temperature_2m_max": "°C", "temperature_2m_min": "°C"},
        "daily": {
            "time": [day.isoformat()],
            "temperature_2m_max": [high],
            "temperature_2m_min": [low],
            "weathercode": [code],
        },
    }


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_good_response_becomes_the_offline_shape_with_rounded_values_and_mapped_condition(
    server: ScriptedServer,
):
    server.script(Reply(body=daily(high=12.6, low=4.4, code=61)))
    result = OpenMeteoBackend(server.url).forecast("巴黎", today=TODAY)
    assert result == {
        "city": "Paris",
        "city_zh": "巴黎",
        "date": "2025-03-15",
        "condition": "light rain",
        "high": 13,
        "low": 4,
        "unit": "celsius",
        "source": "open-meteo",
    }
    assert set(result) == KEYS


def test_request_carries_the_city_coordinates_date_and_daily_fields(server: ScriptedServer):
    tomorrow = TODAY + datetime.timedelta(days=1)
    server.script(Reply(body=daily(day=tomorrow)))
    OpenMeteoBackend(server.url + "/").forecast("Tokyo", date="tomorrow", today=TODAY)
    [request] = server.requests
    assert request.path == "/v1/forecast"
    assert request.params == {
        "latitude": "35.68",
        "longitude": "139.69",
        "daily": "temperature_2m_max,temperature_2m_min,weathercode",
        "timezone": "auto",
        "start_date": tomorrow.isoformat(),
        "end_date": tomorrow.isoformat(),
        "temperature_unit": "celsius",
    }


def test_fahrenheit_is_asked_of_the_service_and_not_converted_again(server: ScriptedServer):
    server.script(Reply(body=daily(high=55.2, low=39.7, code=0)))
    result = OpenMeteoBackend(server.url).forecast("Paris", unit="Fahrenheit", today=TODAY)
    assert server.requests[0].params["temperature_unit"] == "fahrenheit"
    assert (result["high"], result["low"], result["unit"]) == (55, 40, "fahrenheit")
    assert result["condition"] == "clear"


def test_every_city_has_coordinates_on_the_globe():
    for city in cities():
        assert -90 <= city.latitude <= 90, city.name
        assert -180 <= city.longitude <= 180, city.name
    assert len({(c.latitude, c.longitude) for c in cities()}) == len(cities())


def test_every_weather_code_maps_to_a_condition_word_of_the_dataset():
    vocabulary = {word for city in cities() for month in city.climate for word in month.conditions}
    assert set(WMO_CONDITIONS.values()) <= vocabulary
    # Every code of the WMO table Open-Meteo documents is covered.
    documented = {0, 1, 2, 3, 45, 48, 51, 53, 55, 56, 57, 61, 63, 65, 66, 67, 71, 73, 75, 77}
    documented |= {80, 81, 82, 85, 86, 95, 96, 99}
    assert set(WMO_CONDITIONS) == documented


def test_server_error_is_a_tool_error_with_the_status_and_reason(server: ScriptedServer):
    server.script(Reply(500, {"error": True, "reason": "database   unavailable"}))
    with pytest.raises(WeatherServiceError) as info:
        OpenMeteoBackend(server.url).forecast("Paris", today=TODAY)
    message = str(info.value)
    assert "HTTP 500" in message
    assert "database unavailable" in message
    assert "APP_WEATHER_BACKEND=offline" in message


def test_rejected_request_reports_the_service_reason(server: ScriptedServer):
    server.script(Reply(400, {"error": True, "reason": "Parameter 'start_date' is out of range"}))
    with pytest.raises(ToolError, match=r"rejected the request \(HTTP 400: Parameter 'start_date'"):
        OpenMeteoBackend(server.url).forecast("Paris", today=TODAY)


def test_error_without_a_json_reason_uses_the_status_phrase(server: ScriptedServer):
    server.script(Reply(503, "<html>down</html>"))
    with pytest.raises(ToolError, match="HTTP 503: Service Unavailable"):
        OpenMeteoBackend(server.url).forecast("Paris", today=TODAY)


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        {"reason": "no daily block"},
        {"daily": {"time": ["2025-03-14"], "temperature_2m_max": [1], "temperature_2m_min": [0]}},
        daily(high=None),
        daily(low="cold"),
        daily(code=42),
        daily(code=True),
        daily(high=3, low=9),
        [1, 2, 3],
    ],
    ids=[
        "not-json",
        "no-daily",
        "other-day",
        "null-high",
        "text-low",
        "unknown-code",
        "bool-code",
        "low-above-high",
        "a-list",
    ],
)
def test_malformed_answers_are_invalid_response_errors(server: ScriptedServer, body: object):
    server.script(Reply(body=body))
    with pytest.raises(WeatherServiceError, match="invalid response from the weather service"):
        OpenMeteoBackend(server.url).forecast("Paris", today=TODAY)


def test_accepts_the_newer_weather_code_key(server: ScriptedServer):
    body = daily(code=95)
    body["daily"]["weather_code"] = body["daily"].pop("weathercode")
    server.script(Reply(body=body))
    assert OpenMeteoBackend(server.url).forecast("Paris", today=TODAY)["condition"] == (
        "thunderstorms"
    )


def test_a_hanging_service_times_out_with_a_clear_message(server: ScriptedServer):
    server.script(Reply(body=HANG))  # it never answers: only the client's timeout ends the call
    with pytest.raises(ToolError) as info:
        OpenMeteoBackend(server.url, timeout=0.5).forecast("Paris", today=TODAY)
    assert str(info.value) == (
        "the weather service did not answer in 0.5 s; try again or use the offline dataset "
        "(APP_WEATHER_BACKEND=offline)"
    )


def test_connection_refused_is_a_tool_error_naming_the_service():
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(WeatherServiceError) as info:
        OpenMeteoBackend(url, timeout=2).forecast("Paris", today=TODAY)
    message = str(info.value)
    assert f"could not reach the weather service at {url}" in message
    assert "APP_WEATHER_BACKEND=offline" in message


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"city": "Atlantis"}, ToolNotFoundError, "Atlantis"),
        ({"city": " "}, ToolInputError, "no city given"),
        ({"city": "Paris", "unit": "kelvin"}, ToolInputError, "kelvin"),
        ({"city": "Paris", "date": "next week"}, ToolInputError, "YYYY-MM-DD"),
        ({"city": "Paris", "date": "2025-03-31"}, ToolNotFoundError, "2025-03-30"),
        ({"city": "Paris", "date": "2025-02-12"}, ToolNotFoundError, "2025-02-13"),
    ],
)
def test_bad_arguments_fail_like_the_offline_tool_without_a_request(
    server: ScriptedServer, kwargs: dict, error: type[ToolError], fragment: str
):
    with pytest.raises(error, match=fragment):
        OpenMeteoBackend(server.url).forecast(**kwargs, today=TODAY)
    assert server.requests == []


def test_both_ends_of_the_service_range_are_asked(server: ScriptedServer):
    first, last = datetime.date(2025, 2, 13), datetime.date(2025, 3, 30)
    server.script(Reply(body=daily(day=first)), Reply(body=daily(day=last)))
    backend = OpenMeteoBackend(server.url)
    assert backend.forecast("Paris", date=first.isoformat(), today=TODAY)["date"] == "2025-02-13"
    assert backend.forecast("Paris", date=last.isoformat(), today=TODAY)["date"] == "2025-03-30"


@pytest.mark.parametrize("base_url", ["api.open-meteo.com", "ftp://example.org", ""])
def test_base_url_must_be_http(base_url: str):
    with pytest.raises(ValueError, match="http:// or https://"):
        OpenMeteoBackend(base_url)


def test_defaults_are_the_public_service_and_five_seconds():
    backend = OpenMeteoBackend()
    assert backend.base_url == DEFAULT_BASE_URL == "https://api.open-meteo.com"
    assert backend.timeout == 5


def test_offline_backend_is_the_existing_tool():
    assert make_weather_tool("offline") is get_weather


def test_online_tool_has_the_offline_name_description_and_schema():
    online = make_weather_tool("open-meteo")
    assert online.name == "get_weather"
    assert online.description == get_weather.description
    assert online.args_schema is WeatherArgs
    assert online.args == get_weather.args
    assert (
        online.tool_call_schema.model_json_schema()
        == get_weather.tool_call_schema.model_json_schema()
    )


def test_online_tool_calls_the_service_named_by_app_weather_url(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("APP_WEATHER_URL", server.url)
    today = clock.today()
    server.script(Reply(body=daily(day=today, high=30.4, low=24.5, code=80)))
    raw = make_weather_tool("open-meteo").invoke({"city": "新加坡"})
    assert "新加坡" in raw
    assert json.loads(raw) == {
        "city": "Singapore",
        "city_zh": "新加坡",
        "date": today.isoformat(),
        "condition": "showers",
        "high": 30,
        "low": 24,
        "unit": "celsius",
        "source": "open-meteo",
    }
    assert server.requests[0].params["start_date"] == today.isoformat()


def test_online_tool_lets_tool_errors_propagate(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("APP_WEATHER_URL", server.url)
    server.script(Reply(502, {"error": True, "reason": "bad gateway"}))
    with pytest.raises(WeatherServiceError, match="HTTP 502"):
        make_weather_tool("open-meteo").invoke({"city": "Paris"})


def test_unknown_backend_name_lists_the_valid_names():
    with pytest.raises(ValueError, match=r"'openweather'.*offline, open-meteo"):
        make_weather_tool("openweather")
