"""The model's context window: read where each server reports it, stated by each server's overflow
errors, and a thread that outgrows it keeps answering (summarised; history and export keep the full
text). Real HTTP on 127.0.0.1 through langchain-openai, as the CLI uses it."""

from __future__ import annotations

import io
import json
import random
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from app.cli.render import ConsoleRenderer
from app.config import load_settings
from app.models import make_chat_model
from app.models.window import discover_window, endpoint_window, forget_windows
from app.service.context import SYSTEM_PROMPT, make_context
from app.service.events import NodeUpdate
from app.store import open_checkpointer
from graphs.react.graph import build_graph, recursion_limit
from graphs.shared.model_errors import classify_call_error, classify_model_error, window_from_error
from graphs.shared.window import (
    ContextWindow,
    context_budget,
    overhead_tokens,
    tool_schema_tokens,
)
from graphs.state import AgentContext, turn_input
from tests import overflow_replies as servers
from tests.conftest import run_cli
from tests.openai_server import OpenAIServer, Reply, text
from tests.openai_server import openai_server as openai_server  # the fixture
from tests.overflow_replies import WindowedServer, request_tokens
from tools import default_tools

MODEL = "smollm2"
WINDOW = 4096
WORDS = (
    "tomatoes",
    "basil",
    "peppers",
    "compost",
    "mulch",
    "water",
    "sunlight",
    "trellis",
    "seeds",
)
NOTICE = (
    "the conversation is longer than the model's 4,096-token window; older turns were summarised"
)


@pytest.fixture(autouse=True)
def api_key(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    forget_windows()
    yield
    forget_windows()


def words(count: int, seed: int) -> str:
    """Filler that never repeats a stretch of itself (a looping reply would be stopped)."""
    pick = random.Random(seed).choice
    return " ".join(pick(WORDS) for _ in range(count))


def note(turn: int) -> str:
    return f"Note {turn}: {words(150, turn)}"


def answer(turn: int) -> str:
    return f"Answer {turn}: {words(120, turn + 3)}"


def failure(server: OpenAIServer, reply: Reply) -> Exception:
    """The exception the real client raises for `reply`, as the agent node sees it."""
    server.add(reply)
    model = make_chat_model(f"openai:{MODEL}", timeout=5, base_url=server.base_url)
    with pytest.raises(Exception) as caught:
        model.invoke([HumanMessage("hello")])
    return caught.value


# --- every server's overflow is an overflow ----------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "stated"),
    [
        pytest.param(servers.llama_cpp_400(5274, 4096), 4096, id="llama.cpp-400"),
        pytest.param(servers.llama_cpp_400_old(), None, id="llama.cpp-400-older-builds"),
        pytest.param(servers.llama_cpp_stream_error(5274, 4096), 4096, id="llama.cpp-in-stream"),
        pytest.param(servers.llama_cpp_python_400(5000, 4096), 4096, id="llama-cpp-python-400"),
        pytest.param(servers.vllm_400(9000, 8192), 8192, id="vllm-400"),
        pytest.param(servers.vllm_400_legacy(9000, 8192), 8192, id="vllm-400-before-0.11"),
        pytest.param(servers.ollama_400(), None, id="ollama-400"),
        pytest.param(servers.ollama_stream_error(), None, id="ollama-in-stream"),
        pytest.param(servers.openai_400(130_000, 128_000), 128_000, id="openai-400"),
    ],
)
def test_every_servers_overflow_is_a_context_overflow_never_transient(
    openai_server: OpenAIServer, reply: Reply, stated: int | None
) -> None:
    exc = failure(openai_server, reply)

    error = classify_model_error(exc)

    assert error["kind"] == "context_overflow", error
    assert error["message"].startswith("the conversation is too long for the model: ")
    assert window_from_error(exc) == stated
    assert error["retry_after"] is None


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(servers.empty_stream(), id="empty-stream"),
        pytest.param(servers.sse(""), id="no-body"),
    ],
)
def test_an_empty_stream_after_a_long_prompt_is_an_overflow(
    openai_server: OpenAIServer, reply: Reply
) -> None:
    openai_server.add(reply)  # the client asks once more unstreamed, and fares no better
    exc = failure(openai_server, reply)
    assert len(openai_server.completions) == 2

    assert classify_call_error(exc, 5000)["kind"] == "context_overflow"
    assert classify_call_error(exc, 3000, window_tokens=WINDOW)["kind"] == "context_overflow"
    # A short prompt that gets an empty stream is a flaky endpoint: retried, not summarised.
    assert classify_call_error(exc, 40)["kind"] == "model_transient"
    assert classify_call_error(exc, 1000, window_tokens=WINDOW)["kind"] == "model_transient"


def test_a_stream_error_only_a_reader_of_error_lines_sees_is_named_by_the_unstreamed_retry(
    openai_server: OpenAIServer,
) -> None:
    """Older llama.cpp builds put the overflow on an `error:` SSE line the client ignores, so the
    stream looks empty; asked again unstreamed, the server says what it is."""
    openai_server.add(servers.llama_cpp_stream_error_field(5274, 4096))
    exc = failure(openai_server, servers.llama_cpp_400(5274, 4096))
    assert len(openai_server.completions) == 2
    for prompt_tokens in (40, 5000):
        assert classify_call_error(exc, prompt_tokens)["kind"] == "context_overflow"
    assert window_from_error(exc) == 4096


# --- where each server reports its window ------------------------------------------------------


def ollama_show(server: OpenAIServer) -> None:
    servers.advertise_ollama(server, MODEL, training=131_072, num_ctx=8192)


def ollama_loaded(server: OpenAIServer) -> None:
    servers.advertise_ollama(server, MODEL, training=131_072)
    servers.advertise_ollama_loaded(server, MODEL, 4096)


def llama_cpp_python(server: OpenAIServer) -> None:
    listing = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "me"}]}
    server.route("GET", "/v1/models", listing)


@pytest.mark.parametrize(
    ("advertise", "expected"),
    [
        pytest.param(
            lambda s: servers.advertise_llama_cpp(s, MODEL, n_ctx=4096, n_ctx_train=8192),
            (4096, True, "llama.cpp /props"),
            id="llama.cpp",
        ),
        pytest.param(
            lambda s: s.route(
                "GET", "/v1/models", {"data": [{"id": MODEL, "meta": {"n_ctx_train": 8192}}]}
            ),
            (8192, False, "the training context (meta.n_ctx_train on /v1/models)"),
            id="llama.cpp-without-props",
        ),
        pytest.param(
            lambda s: servers.advertise_vllm(s, MODEL, 8192),
            (8192, True, "max_model_len on /v1/models"),
            id="vllm",
        ),
        pytest.param(ollama_show, (8192, True, "num_ctx on Ollama /api/show"), id="ollama-num_ctx"),
        pytest.param(ollama_loaded, (4096, True, "Ollama /api/ps"), id="ollama-loaded"),
        pytest.param(
            lambda s: servers.advertise_ollama(s, MODEL, training=131_072),
            (131_072, False, "the training context (Ollama /api/show model_info)"),
            id="ollama-training-maximum-only",
        ),
        pytest.param(
            lambda s: servers.advertise_lmstudio(s, MODEL, loaded=4096, maximum=32768),
            (4096, True, "LM Studio /api/v0/models"),
            id="lm-studio",
        ),
        pytest.param(llama_cpp_python, (None, False, "unknown"), id="llama-cpp-python"),
    ],
)
def test_the_window_is_read_where_each_server_reports_it(
    openai_server: OpenAIServer,
    advertise: Callable[[OpenAIServer], Any],
    expected: tuple[int | None, bool, str],
) -> None:
    advertise(openai_server)

    window = discover_window(openai_server.base_url, MODEL, "test-key")

    assert (window.tokens, window.exact, window.source) == expected
    assert not openai_server.completions  # asking costs no completion
    keys = {
        {k.lower(): v for k, v in r.headers.items()}["authorization"]
        for r in openai_server.requests
    }
    assert keys == {"Bearer test-key"}


def test_the_window_is_asked_once_per_process_and_endpoint(openai_server: OpenAIServer) -> None:
    servers.advertise_vllm(openai_server, MODEL, 8192)

    first = endpoint_window(openai_server.base_url, MODEL)
    again = endpoint_window(openai_server.base_url + "/", MODEL, reply_tokens=512)

    assert again is first and (first.tokens, first.reply_tokens) == (8192, 512)
    assert [r.path for r in openai_server.requests] == ["/v1/models"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_failed_window_query_is_silent_and_the_configured_budget_holds(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_server.route("GET", "/props", {"default_generation_settings": {"n_ctx": "many"}})
    openai_server.route("GET", "/v1/models", ["not", "a", "listing"])
    for base_url in (f"http://127.0.0.1:{free_port()}/v1", openai_server.base_url):
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        context = make_context(load_settings(model=f"openai:{MODEL}"))

        assert context.window is not None and context.window.tokens is None
        assert context_budget(context) == 32_000  # APP_CONTEXT_TOKENS' default


def test_the_offline_model_and_the_openai_api_are_not_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert make_context(load_settings(model="offline")).window is None
    assert make_context(load_settings(model="openai:gpt-4o-mini")).window is None


# --- the budget --------------------------------------------------------------------------------


def budget_context(window: ContextWindow | None, configured: int = 32_000, explicit: bool = False):
    return AgentContext(
        model=None,  # type: ignore[arg-type]
        tools=default_tools(Path("ws")),
        system_prompt=SYSTEM_PROMPT,
        context_tokens=configured,
        context_tokens_explicit=explicit,
        window=window,
    )


def test_the_budget_is_the_window_less_the_reply_the_tools_and_a_margin() -> None:
    window = ContextWindow(4096, "llama.cpp /props", exact=True)
    context = budget_context(window)
    overhead = overhead_tokens(context)

    budget = context_budget(context)

    assert overhead > 900  # the tool schemas are most of it
    assert budget == int((4096 - 1024) * 0.85) - overhead
    window.reply_tokens = 256  # a configured max_tokens leaves more room for the messages
    assert context_budget(context) == int((4096 - 256) * 0.85) - overhead


def test_the_tool_overhead_follows_the_tools_of_each_call() -> None:
    """Schema sizes are remembered per tool object: a call with other tools counts those."""
    tools = default_tools(Path("ws"))
    one, all_tools = tool_schema_tokens(tools[:1]), tool_schema_tokens(tools)

    assert 0 < one < all_tools
    assert tool_schema_tokens(tools[:1]) == one
    renamed = tools[0].model_copy(update={"description": tools[0].description * 3})
    assert tool_schema_tokens([renamed]) > one  # a new tool object is measured afresh


def test_which_budget_wins() -> None:
    exact = ContextWindow(8192, "max_model_len on /v1/models", exact=True)
    ceiling = ContextWindow(131_072, "the training context", exact=False)
    fit_8192 = context_budget(budget_context(exact))

    # a detected running window replaces the default (32,000)
    assert fit_8192 == int((8192 - 1024) * 0.85) - overhead_tokens(budget_context(exact))
    assert context_budget(budget_context(exact, 3000, explicit=True)) == 3000  # explicit wins
    assert context_budget(budget_context(ceiling)) == 32_000  # a training maximum only caps
    assert context_budget(budget_context(None)) == 32_000
    proven = ContextWindow(8192, "stated by the endpoint", exact=True, proven=True)
    assert context_budget(budget_context(proven, 32_000, explicit=True)) == fit_8192


def test_an_overflow_teaches_the_window() -> None:
    stated, guessed, detected = ContextWindow(), ContextWindow(), ContextWindow(4096, "x", True)

    stated.learn_from_overflow(4096, prompt_tokens=5000)
    guessed.learn_from_overflow(None, prompt_tokens=5000)
    detected.learn_from_overflow(None, prompt_tokens=3000)  # our count said it fitted

    assert (stated.tokens, stated.exact, stated.proven) == (4096, True, True)
    assert (guessed.tokens, guessed.exact, guessed.proven) == (4000, False, True)
    assert (detected.tokens, detected.margin) == (4096, pytest.approx(0.68))


# --- a thread that outgrows the window keeps answering -----------------------------------------


class Thread:
    """Turns of one thread through the compiled graph against a server, as the CLI runs them."""

    def __init__(self, tmp_path: Path) -> None:
        self.graph = build_graph(InMemorySaver())
        self.workspace = tmp_path / "ws"
        self.config: dict[str, Any] = {"configurable": {"thread_id": "long"}}
        self.turn = 0
        self.events: list = []

    def context(self, server: OpenAIServer, window: ContextWindow) -> AgentContext:
        model = make_chat_model(f"openai:{MODEL}", timeout=5, base_url=server.base_url)
        return AgentContext(
            model=model,
            tools=default_tools(self.workspace),
            system_prompt=SYSTEM_PROMPT,
            context_tokens=32_000,
            window=window,
            backoff_base=0,
            sleep=lambda s: None,
        )

    def send(self, server: OpenAIServer, context: AgentContext, message: str, reply: str) -> dict:
        self.turn += 1
        server.add(text(reply))
        self.events = list(
            self.graph.stream(
                turn_input(HumanMessage(message, id=f"h{self.turn}"), self.turn),
                {**self.config, "recursion_limit": recursion_limit(context)},
                context=context,
                stream_mode=["updates", "custom"],
            )
        )
        return self.graph.get_state(self.config).values

    def summaries(self) -> list[dict]:
        return [e for mode, e in self.events if mode == "custom" and e["type"] == "summarized"]


def overflow_of(reply: Callable[[], Reply]) -> Callable[[int, int], Reply]:
    return lambda prompt, window: reply()


SHAPES = [
    pytest.param(servers.llama_cpp_400, WINDOW, id="llama.cpp-400"),
    pytest.param(overflow_of(servers.llama_cpp_400_old), None, id="llama.cpp-400-older-builds"),
    pytest.param(servers.llama_cpp_stream_error, WINDOW, id="llama.cpp-in-stream"),
    pytest.param(servers.llama_cpp_stream_error_field, None, id="llama.cpp-error-field"),
    pytest.param(servers.llama_cpp_python_400, WINDOW, id="llama-cpp-python-400"),
    pytest.param(overflow_of(servers.empty_stream), None, id="empty-stream"),
    pytest.param(lambda p, w: servers.vllm_400(p, w), WINDOW, id="vllm-400"),
    pytest.param(lambda p, w: servers.vllm_400_legacy(p, w), WINDOW, id="vllm-400-before-0.11"),
    pytest.param(overflow_of(servers.ollama_400), None, id="ollama-400"),
    pytest.param(overflow_of(servers.ollama_stream_error), None, id="ollama-in-stream"),
    pytest.param(servers.openai_400, WINDOW, id="openai-400"),
]


@pytest.mark.parametrize(("overflow", "stated"), SHAPES)
def test_a_thread_grown_past_the_window_answers_every_turn(
    tmp_path: Path, overflow: Callable[[int, int], Reply], stated: int | None
) -> None:
    """The window is not advertised (like llama-cpp-python's server) and the budget is the
    default 32,000 tokens, far above the server's 4,096: each overflow is recognised, the older
    turns are summarised and the turn is sent again, and the window is learned."""
    thread, window = Thread(tmp_path), ContextWindow()
    with WindowedServer(WINDOW, overflow) as server:
        context = thread.context(server, window)
        for turn in range(1, 10):
            message = "?" if turn == 9 else note(turn)

            values = thread.send(server, context, message, answer(turn))

            assert (values["status"], values["messages"][-1].content) == ("answered", answer(turn))
        assert server.overflows, "the thread never outgrew the window"
        assert not server.script
    assert window.proven and window.tokens is not None
    if stated:
        assert (window.tokens, window.exact) == (stated, True)
    else:
        assert window.tokens < max(request_tokens(r.body) for r in server.overflows)


def test_with_the_window_advertised_no_request_overflows(tmp_path: Path) -> None:
    thread = Thread(tmp_path)
    with WindowedServer(WINDOW, servers.llama_cpp_400) as server:
        servers.advertise_llama_cpp(server, MODEL, n_ctx=WINDOW, n_ctx_train=8192)
        window = endpoint_window(server.base_url, MODEL)
        context = thread.context(server, window)
        summarised = []
        for turn in range(1, 10):
            values = thread.send(server, context, note(turn), answer(turn))
            assert values["messages"][-1].content == answer(turn)
            summarised += thread.summaries()

        assert not server.overflows
        assert max(request_tokens(r.body) for r in server.completions) <= WINDOW
    assert {(s["reason"], s["window"]) for s in summarised} == {("budget", WINDOW)}


@pytest.mark.parametrize(
    "overflow",
    [
        pytest.param(servers.llama_cpp_400, id="window-stated"),
        pytest.param(overflow_of(servers.empty_stream), id="empty-stream"),
    ],
)
def test_when_the_summarisers_own_input_overflows_it_summarises_in_chunks(
    tmp_path: Path, overflow: Callable[[int, int], Reply]
) -> None:
    """A long thread written with a large window, then continued on a 4,096-token server (a
    smaller model, a restarted server): the older turns are far longer than the window."""
    thread = Thread(tmp_path)
    with WindowedServer(100_000, servers.llama_cpp_400) as large:
        context = thread.context(large, ContextWindow())
        for turn in range(1, 21):
            thread.send(large, context, note(turn), answer(turn))
    with WindowedServer(WINDOW, overflow) as small:
        context = thread.context(small, ContextWindow())

        values = thread.send(small, context, "?", "Still here.")

        assert (values["status"], values["messages"][-1].content) == ("answered", "Still here.")
        assert len(small.summaries) >= 3  # several chunks, oldest first, each one fitting
        assert all(request_tokens(r.body) <= WINDOW for r in small.summaries)
        first_chunk = small.summaries[0].messages[-1]["content"]
        assert "Note 1:" in first_chunk and "Note 20:" not in first_chunk
        [summarised] = thread.summaries()
        assert summarised["reason"] == "overflow"
        again = thread.send(small, context, "and now?", "Fine.")
        assert again["messages"][-1].content == "Fine."


def test_a_message_longer_than_the_window_fails_with_what_to_do(tmp_path: Path) -> None:
    thread, window = Thread(tmp_path), ContextWindow(WINDOW, "llama.cpp /props", exact=True)
    with WindowedServer(WINDOW, servers.llama_cpp_400) as server:
        context = thread.context(server, window)

        values = thread.send(server, context, words(4000, 3), "never sent")
        server.discard_unused()

    assert values["status"] == "failed"
    text_ = values["messages"][-1].content
    assert text_.startswith("The conversation no longer fits the model's context (4,096-token")
    assert "send a shorter message" in text_
    assert "Check that the model endpoint is up" not in text_


# --- the CLI: what the user sees, and what history and export keep --------------------------------


def chat(*args: str) -> tuple[int, str, str]:
    # A width no answer reaches: each answer is compared exactly as the model wrote it (at a
    # narrower COLUMNS the CLI would wrap it between words).
    result = run_cli("chat", "-t", "garden", "--model", f"openai:{MODEL}", *args, columns=10_000)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def test_cli_thread_past_the_window_answers_and_history_and_export_keep_everything(
    monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    """The issue's session: a llama.cpp server with a 4,096-token window, many long turns and a
    one-character prompt at the end, through `chat -m` (one process per turn)."""
    with WindowedServer(WINDOW, servers.llama_cpp_400) as server:
        servers.advertise_llama_cpp(server, MODEL, n_ctx=WINDOW, n_ctx_train=8192)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        stderr = ""
        for turn in range(1, 8):
            server.add(text(answer(turn)))
            code, out, err = chat("-m", "?" if turn == 7 else note(turn))
            assert (code, out) == (0, answer(turn) + "\n"), err
            stderr += err
        assert not server.overflows
        server.add(text("pong"))
        monkeypatch.setenv("APP_MODEL", f"openai:{MODEL}")
        doctor = run_cli("doctor", "--ping")

    assert NOTICE in " ".join(stderr.split())
    assert "Check that the model endpoint is up" not in stderr
    assert "context window: 4,096 tokens (llama.cpp /props)" in doctor.stdout.decode()
    history = run_cli("history", "--thread", "garden", "--json")
    assert [t["turn"] for t in json.loads(history.stdout)] == [7, 6, 5, 4, 3, 2, 1]
    exported = run_cli("export", "--thread", "garden", "-o", str(isolated / "garden.json"))
    copy = isolated / "copy.sqlite"
    imported = run_cli("import", str(isolated / "garden.json"), "--as", "copy", "--db", str(copy))
    assert (exported.returncode, imported.returncode) == (0, 0), imported.stderr
    for db, thread in ((isolated / "db" / "agent.sqlite", "garden"), (copy, "copy")):
        kept = every_message_ever(db, thread)
        assert all(note(turn) in kept and answer(turn) in kept for turn in range(1, 7))
        head = head_messages(db, thread)
        assert head[0].name == "conversation_summary" and note(1) not in str(head)


def every_message_ever(db: Path, thread: str) -> set[str]:
    """The text of every message in every checkpoint of the thread."""
    with open_checkpointer(db) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": thread}}
        return {
            str(m.content)
            for snapshot in graph.get_state_history(config)
            for m in snapshot.values.get("messages", [])
        }


def head_messages(db: Path, thread: str) -> list:
    with open_checkpointer(db) as saver:
        return (
            build_graph(saver).get_state({"configurable": {"thread_id": thread}}).values["messages"]
        )


def test_cli_unadvertised_window_and_an_empty_stream_still_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """llama-cpp-python's server: no window on /v1/models, and an overflow ends the stream empty.
    Before, every later turn failed with "Check that the model endpoint is up"."""
    with WindowedServer(WINDOW, overflow_of(servers.empty_stream)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        stderr = ""
        for turn in range(1, 7):
            server.add(text(answer(turn)))
            code, out, err = chat("-m", "." if turn == 6 else note(turn))
            assert (code, out) == (0, answer(turn) + "\n"), err
            stderr += err
        assert server.overflows

    assert "older turns were summarised" in " ".join(stderr.split())
    assert "Check that the model endpoint is up" not in stderr


# --- the failure panel ------------------------------------------------------------------------------


def test_the_failure_panel_wraps_its_message_at_80_columns() -> None:
    message = (
        "The model call failed on the first attempt (retry budget 3): HTTP 401: the endpoint "
        "rejected the credentials; check OPENAI_API_KEY (Incorrect API key provided: sk-test. "
        "You can find your API key at https://platform.openai.com/account/api-keys.)"
    )
    out, err = io.StringIO(), io.StringIO()
    renderer = ConsoleRenderer(
        Console(file=out, width=80, soft_wrap=True), Console(file=err, width=80, soft_wrap=True)
    )

    renderer.emit(NodeUpdate("failure_handler", {"messages": [AIMessage(message, id="a1")]}))

    lines = err.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    inside = " ".join(line.strip("│ ") for line in lines[1:-1])
    assert " ".join(inside.split()) == message
    assert "…" not in err.getvalue()
