"""kill -9 of the Aegra instance running a turn, after a side-effecting tool returned and before its
node finished: the other instance takes the run over (issue 29 item 3). Its own pair of instances,
with a scripted model endpoint and a weather service that holds the node open until released."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psycopg
import pytest
from langgraph_sdk import get_sync_client

from tests.aegra_servers import (
    FAST_TAKEOVER,
    AegraUnavailable,
    Instance,
    Pair,
    aegra_pair,
    unavailable,
)
from tests.openai_server import OpenAIServer, text, tool_call, tool_calls
from tests.pg_server import Server
from tests.sdk_scenario import user

HELD_SECONDS = 30  # longest a forecast is held; the tool's own timeout (5 s) ends it sooner
COUNTER = "counter.txt"
pytestmark = pytest.mark.timeout(
    300
)  # two instances' start-up and a take-over: beyond 120 s when loaded


class SideEffectRepeatedError(AssertionError):
    """The side effect ran more than once."""


@dataclass
class HoldingWeather:
    """An Open-Meteo stand-in whose forecasts wait until `release` is set."""

    release: threading.Event = field(default_factory=threading.Event)
    requests: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def held(self) -> bool:
        return bool(self.requests) and not self.release.is_set()


def forecast(day: str) -> dict:
    return {
        "daily": {
            "time": [day],
            "weathercode": [0],
            "temperature_2m_max": [25.0],
            "temperature_2m_min": [15.0],
        }
    }


@contextlib.contextmanager
def holding_weather() -> Iterator[HoldingWeather]:
    weather = HoldingWeather()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            day = parse_qs(urlparse(self.path).query)["start_date"][0]
            weather.requests.append(day)
            weather.release.wait(HELD_SECONDS)
            body = json.dumps(forecast(day)).encode()
            with contextlib.suppress(OSError):  # the held caller may have been killed
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    weather.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    weather.server.daemon_threads = True
    thread = threading.Thread(target=weather.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield weather
    finally:
        weather.release.set()
        weather.server.shutdown()
        weather.server.server_close()
        thread.join(10)


@dataclass
class Takeover:
    pair: Pair
    workspace: Path
    model: OpenAIServer
    weather: HoldingWeather

    def instance_running(self, run_id: str) -> Instance:
        """The instance whose worker holds the run's lease (Aegra's runs.claimed_by names its pid)."""
        with psycopg.connect(self.pair.database_url) as conn:
            row = conn.execute(
                "SELECT claimed_by FROM runs WHERE run_id = %s", (run_id,)
            ).fetchone()
        found = re.search(r"-(\d+)-worker-\d+$", (row or [""])[0] or "")
        assert found, f"run {run_id} is claimed by no worker: {row}"
        [running] = [i for i in (self.pair.a, self.pair.b) if i.pid == int(found.group(1))]
        return running


@pytest.fixture
def takeover(pg_server: Server, tmp_path: Path) -> Iterator[Takeover]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / COUNTER).write_text("END")
    with contextlib.ExitStack() as stack:
        model = stack.enter_context(OpenAIServer())
        weather = stack.enter_context(holding_weather())
        services = {
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
            "APP_WEATHER_BACKEND": "open-meteo",
            "APP_WEATHER_URL": weather.url,
            **FAST_TAKEOVER,
        }
        try:
            pair = stack.enter_context(aegra_pair(pg_server, tmp_path, workspace, **services))
        except AegraUnavailable as exc:
            unavailable(str(exc))
        yield Takeover(pair, workspace, model, weather)


def wait_for(condition, what: str, seconds: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_killed_instances_turn_is_taken_over_and_its_side_effect_runs_once(takeover: Takeover):
    takeover.model.add(
        tool_calls(
            tool_call(
                "edit_file", {"path": COUNTER, "old_text": "END", "new_text": "+END"}, "call_edit"
            ),
            tool_call("get_weather", {"city": "Paris"}, "call_weather"),
        ),
        *[text("done")] * 3,
    )
    counter = takeover.workspace / COUNTER
    client = get_sync_client(url=takeover.pair.a.base, timeout=90)
    tid = client.threads.create()["thread_id"]
    context = {"model": "openai:gpt-test", "approval": "auto"}
    run = client.runs.create(tid, "waypoint", input=user("count and weather"), context=context)

    # The edit has returned and the weather call holds the tools node open.
    wait_for(lambda: counter.read_text() == "+END" and takeover.weather.held(), "the held node")
    victim = takeover.instance_running(run["run_id"])
    victim.kill()
    takeover.weather.release.set()
    survivor = takeover.pair.other(victim)

    other = get_sync_client(url=survivor.base, timeout=90)
    wait_for(
        lambda: other.runs.get(tid, run["run_id"])["status"] not in ("pending", "running"),
        "the take-over",
        seconds=90,
    )
    assert other.runs.get(tid, run["run_id"])["status"] == "success"
    assert other.threads.get_state(tid)["values"]["messages"][-1]["content"] == "done"
    assert len(takeover.weather.requests) == 2, "the survivor re-ran the interrupted node"
    runs_of_edit = counter.read_text().count("+")
    print(f"kill -9 take-over: the side effect ran {runs_of_edit} time(s)")
    if runs_of_edit != 1:
        raise SideEffectRepeatedError(f"the edit ran {runs_of_edit} times: {counter.read_text()!r}")
