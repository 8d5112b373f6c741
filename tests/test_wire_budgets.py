"""Budgets that hold on the wire: a turn's `--max-seconds` (and `doctor --ping`'s timeout) bounds the
whole model call whatever the endpoint sends (keep-alive pings only, a stall, slow tokens), and the
connection is closed when the time is up, so the server stops working on it. And a call that ran out
of time is named a timeout, never a conversation too long for the model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from app.models import make_chat_model
from app.service.context import SYSTEM_PROMPT
from graphs.state import AgentContext
from graphs.strategies import get_strategy, strategy_turn_input
from tests.conftest import run_cli
from tests.openai_server import (
    LLAMA_CPP_PYTHON,
    OpenAIServer,
    Reply,
    empty_choices,
    hang,
    pings,
    slow_text,
    text,
)
from tools import default_tools

BUDGET = 2.0  # seconds: the turn's --max-seconds
ENDPOINT_SECONDS = 60.0  # how long each misbehaving endpoint would go on if nobody hung up
MODEL_TIMEOUT = 30.0  # longer than the budget: the budget, not the request timeout, ends the call
# What the clock may show past the budget: the documented grace is a fraction of a second; the
# rest is margin for a loaded machine. Far below ENDPOINT_SECONDS, so an unbounded call fails.
MARGIN = 8.0
HANGUP_WAIT = 10.0  # seconds the server is given to notice the closed connection
SLOW_ANSWER = " ".join(f"word{i}" for i in range(600))  # never repeats itself


@pytest.fixture(autouse=True)
def api_key(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running
        assert not running.exhausted


def timed_turn(
    server: OpenAIServer,
    tmp_path: Path,
    max_seconds: float | None,
    message: str = "hello",
    timeout: float = MODEL_TIMEOUT,
) -> tuple[dict, float]:
    """One react turn with `--max-seconds`, the model as `--model openai:m` builds it; the state it
    ended in and the seconds it took."""
    model = make_chat_model("openai:m", timeout=timeout, base_url=server.base_url)
    context = AgentContext(
        model=model,
        tools=default_tools(tmp_path / "ws"),
        system_prompt=SYSTEM_PROMPT,
        max_seconds=max_seconds,
        max_retries=2,
        backoff_base=0,
        sleep=lambda seconds: None,
    )
    strategy = get_strategy("react")
    graph = strategy.build(InMemorySaver())
    config = {"configurable": {"thread_id": "wire"}, "recursion_limit": 60}
    started = time.monotonic()
    graph.invoke(strategy_turn_input(strategy, HumanMessage(message), 1), config, context=context)
    return graph.get_state(config).values, time.monotonic() - started


@pytest.mark.parametrize(
    "endpoint",
    [
        pytest.param(pings(ENDPOINT_SECONDS), id="pings-only"),
        pytest.param(hang(ENDPOINT_SECONDS), id="stalled"),
        pytest.param(slow_text(SLOW_ANSWER, every=0.05, chunks=600), id="slow-tokens"),
    ],
)
def test_the_time_budget_ends_the_model_call_and_its_connection(
    server: OpenAIServer, tmp_path: Path, endpoint: Reply
) -> None:
    server.add(endpoint)

    values, elapsed = timed_turn(server, tmp_path, BUDGET)

    assert elapsed < BUDGET + MARGIN
    assert (values["status"], values["budget_exhausted"]) == ("budget_exhausted", "time")
    assert server.hung_up.wait(HANGUP_WAIT), "the server never saw the connection closed"
    assert len(server.completions) == 1  # no retry, no last answer asked once the time is up


def test_doctor_ping_gives_up_on_a_pinging_tool_server_and_names_the_next_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # llama-cpp-python: the streamed tool request comes back empty; the same request unstreamed
    # then waits in the server's queue, which sends keep-alive pings only.
    with OpenAIServer(quirks=LLAMA_CPP_PYTHON) as slow:
        slow.add(text("pong"), pings(ENDPOINT_SECONDS))
        monkeypatch.setenv("OPENAI_BASE_URL", slow.base_url)
        monkeypatch.setenv("APP_MODEL_TIMEOUT", str(BUDGET))
        started = time.monotonic()

        result = run_cli("doctor", "--ping", "--model", "openai:smollm2")

        elapsed = time.monotonic() - started
        out = result.stdout.decode()
        assert elapsed < 2 * BUDGET + MARGIN, out
        assert result.returncode == 1, out
        assert "FAIL  tools:" in out and "did not answer" in out
        assert "--tool-protocol react" in out and "APP_MODEL_TIMEOUT" in out
        assert slow.hung_up.wait(HANGUP_WAIT), "the abandoned request was never closed"
        slow.assert_done()


def test_an_empty_stream_then_a_timeout_is_a_timeout_not_an_overflow(tmp_path: Path) -> None:
    # llama-cpp-python answers a streamed tool request with an empty stream; asked again
    # unstreamed, it stays silent past the request timeout (busy with another client). The prompt
    # is long (over 2,000 tokens), but nothing says it does not fit a window nobody knows.
    long_message = "Summarise these facts: " + " ".join(f"fact{i}" for i in range(2500))
    with OpenAIServer(quirks=LLAMA_CPP_PYTHON) as busy:
        busy.add(hang(ENDPOINT_SECONDS), text("They are numbered facts."))

        values, _ = timed_turn(busy, tmp_path, None, long_message, timeout=1.0)

        assert values["status"] == "answered"  # the timeout was retried, as a timeout is
        assert values["messages"][-1].content == "They are numbered facts."
        assert [r.stream for r in busy.completions] == [True, False, True, False]
        assert all(r.body["messages"][-1]["content"] == long_message for r in busy.completions)
        busy.assert_done()


def test_the_retry_after_an_empty_stream_skips_the_connection_the_server_closed(
    tmp_path: Path,
) -> None:
    # llama-cpp-python breaks off a streamed tool request and then closes that connection without
    # saying so: the unstreamed retry, sent on it from the pool, gets no response at all. Sent
    # again on a new connection it is answered (before: "Connection error" at every attempt).
    with OpenAIServer(quirks=LLAMA_CPP_PYTHON) as server:
        server.add(text("42 it is."))

        values, _ = timed_turn(server, tmp_path, None, "what is 6 times 7")

        assert server.dropped_a_request.is_set()  # the pool did send one on the dead connection
        assert values["status"] == "answered"
        assert values["messages"][-1].content == "42 it is."
        assert [r.stream for r in server.completions] == [True, False]
        server.assert_done()


def test_a_timeout_after_an_empty_stream_that_is_not_retried_says_timeout(tmp_path: Path) -> None:
    long_message = "Summarise these facts: " + " ".join(f"fact{i}" for i in range(2500))
    with OpenAIServer(quirks=LLAMA_CPP_PYTHON) as busy:
        busy.add(*[hang(ENDPOINT_SECONDS)] * 3)  # max_retries=2: three attempts

        values, _ = timed_turn(busy, tmp_path, None, long_message, timeout=1.0)

        notice = values["messages"][-1].content
        assert values["status"] == "failed"
        assert notice.startswith("The model call kept failing after 3 attempts")
        assert "did not answer in time" in notice
        assert "no longer fits" not in notice and "shorter message" not in notice
        busy.assert_done()


def test_without_a_time_budget_the_request_timeout_ends_a_ping_only_reply(tmp_path: Path) -> None:
    with OpenAIServer() as pinging:
        pinging.add(*[pings(ENDPOINT_SECONDS)] * 3)  # max_retries=2: three attempts

        values, elapsed = timed_turn(pinging, tmp_path, None, timeout=1.0)

        assert elapsed < 3 * 1.0 + MARGIN
        notice = values["messages"][-1].content
        assert values["status"] == "failed"
        assert notice.startswith("The model call kept failing after 3 attempts")
        assert (
            "no reply within 1 s (the request timeout; keep-alive comments do not count)" in notice
        )
        assert pinging.hung_up.wait(HANGUP_WAIT)
        pinging.assert_done()


def test_an_empty_stream_then_no_completion_is_told_without_the_parsers_error(
    tmp_path: Path,
) -> None:
    with OpenAIServer(quirks=LLAMA_CPP_PYTHON) as empty:
        empty.add(*[empty_choices()] * 3)  # the unstreamed retries bring no choice either

        values, _ = timed_turn(empty, tmp_path, None)

        notice = values["messages"][-1].content
        assert values["status"] == "failed"
        assert "unstreamed brought no reply either (its `choices` were empty)" in notice
        assert "Error" not in notice  # no IndexError, ValueError … for the user to decode
        empty.assert_done()
