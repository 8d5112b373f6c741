"""Waypoint's own time per turn next to the model's: `chat` turns (the session, the renderer, the
checkpoints, long-term memory) against an OpenAI-compatible endpoint on 127.0.0.1 that takes a fixed
time per request, as a real model would. Waypoint's share is the turn's wall time less the time the
endpoint spent answering (measured at the endpoint, so the HTTP client counts as Waypoint's)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.measure import median, p95
from bench.model import QUESTION, question
from bench.report import Target

MODEL = "openai:bench-fixed-latency"
TARGET_PERCENT = 5.0  # issue 34: the agent adds under 5 % to a turn of a real model
ANSWER_WORDS = 8  # streamed chunks of the final answer


class FixedLatencyEndpoint:
    """Chat completions after `latency` seconds: a calculator call for "what is a plus b", the
    sum once the tool answered; streamed like a real server. Records each request's duration."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.durations: list[float] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    def __enter__(self) -> FixedLatencyEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # the window probes: nothing to report
                self.send_error(404)

            def do_POST(self) -> None:
                if self.path.endswith("/chat/completions"):
                    endpoint.answer(self)
                else:  # Ollama's window probe
                    self.send_error(404)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def spent(self) -> float:
        with self._lock:
            return sum(self.durations)

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        started = time.perf_counter()
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        time.sleep(self.latency)
        chunks = reply_chunks(body.get("messages") or [])
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        for delta in chunks:
            choice = {"index": 0, "delta": delta, "finish_reason": None}
            event = {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": MODEL,
                "choices": [choice],
            }
            handler.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        with self._lock:
            self.durations.append(time.perf_counter() - started)


def reply_chunks(messages: list[dict]) -> list[dict]:
    """The deltas of the reply: a tool call for a sum, else the sum the tool gave, word by word."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        words = f"The answer is {last.get('content')}, as the calculator says.".split()
        padded = (words * ANSWER_WORDS)[: max(ANSWER_WORDS, len(words))]
        return [{"role": "assistant", "content": f"{w} "} for w in padded]
    match = QUESTION.search(str(last.get("content", "")))
    if match is None:
        return [{"role": "assistant", "content": "Noted."}]
    arguments = json.dumps({"expression": f"{match[1]} + {match[2]}"})
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "calculator", "arguments": arguments}
    return [{"role": "assistant", "content": None, "tool_calls": [call]}]


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def model_overhead(workdir: Path, turns: int, latency: float) -> dict:
    """`turns` chat turns on one thread, each one calculator call and an answer (two requests)."""
    from bench.runners import SessionRunner

    own, model, walls, cpu = [], [], [], []
    with (
        FixedLatencyEndpoint(latency) as endpoint,
        environment(OPENAI_BASE_URL=endpoint.base_url, OPENAI_API_KEY="bench", APP_MODEL=MODEL),
    ):
        runner = SessionRunner(workdir / "overhead" / "agent.sqlite", model_spec=MODEL)
        try:
            runner.turn(question(0))  # warm: imports, the window probe, the first connection
            for turn in range(1, turns + 1):
                before, started = endpoint.spent(), time.perf_counter()
                cpu_started = time.process_time()
                runner.turn(question(turn))
                cpu.append(time.process_time() - cpu_started)
                wall = time.perf_counter() - started
                spent = endpoint.spent() - before
                walls.append(wall)
                model.append(spent)
                own.append(wall - spent)
        finally:
            runner.close()
        requests = len(endpoint.durations)
    return {
        "turns": turns,
        "latency_s": latency,
        "requests_per_turn": requests / (turns + 1),
        "turn_ms_median": 1000 * median(walls),
        "model_ms_median": 1000 * median(model),
        "own_ms_median": 1000 * median(own),
        "own_ms_p95": 1000 * p95(own),
        "own_percent_median": 100 * median([o / m for o, m in zip(own, model, strict=True)]),
        # CPU time of the process (the endpoint's share is a sleep): what a loaded machine's
        # waiting for a core does not inflate
        "own_cpu_ms_median": 1000 * median(cpu),
        "own_cpu_percent_median": 100 * median([c / m for c, m in zip(cpu, model, strict=True)]),
        "load_average": list(os.getloadavg()),
    }


def targets(result: dict) -> list[Target]:
    return [
        Target(
            name=f"Waypoint's own {kind} next to the model's time, per turn (median)",
            value=result[key],
            limit=TARGET_PERCENT,
            unit="%",
            met=result[key] < TARGET_PERCENT,
            note=f"{result['latency_s']:g} s per request at the endpoint; load average "
            f"{result['load_average'][0]:.1f}",
        )
        for kind, key in (("wall time", "own_percent_median"), ("CPU", "own_cpu_percent_median"))
    ]


def table(result: dict) -> str:
    rows = [
        ("turn (wall)", f"{result['turn_ms_median']:.1f} ms"),
        ("model (endpoint)", f"{result['model_ms_median']:.1f} ms"),
        ("Waypoint's own, p50", f"{result['own_ms_median']:.1f} ms"),
        ("Waypoint's own, p95", f"{result['own_ms_p95']:.1f} ms"),
        ("Waypoint's own / model", f"{result['own_percent_median']:.2f} %"),
        ("Waypoint's CPU, p50", f"{result['own_cpu_ms_median']:.1f} ms"),
        ("Waypoint's CPU / model", f"{result['own_cpu_percent_median']:.2f} %"),
        ("load average at the end", ", ".join(f"{x:.1f}" for x in result["load_average"])),
        ("requests per turn", f"{result['requests_per_turn']:.1f}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
