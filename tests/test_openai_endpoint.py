"""The graph with the real langchain-openai client against a real HTTP server that plays scripted
replies and faults: HTTP attempts are counted on the wire, and every thread stays usable after."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.base import BaseCheckpointSaver

from app.models import make_chat_model
from app.service.context import SYSTEM_PROMPT
from app.store import open_checkpointer
from graphs.react.graph import build_graph, recursion_limit
from graphs.shared.messages import is_notice, new_message_id
from graphs.state import AgentContext, turn_input
from tests.conftest import run_cli
from tests.fakes import TOOL_NAMES
from tests.openai_server import (
    OpenAIServer,
    empty_choices,
    error,
    hang,
    raw,
    text,
    tool_call,
    tool_calls,
)
from tests.openai_server import openai_server as openai_server  # the fixture
from tools import default_tools

MAX_RETRIES = 2
TIMEOUT = 1.0  # the client's timeout; only the hang case ever waits for it
HANG_SECONDS = 30.0
STREAM_MODES = ["updates", "messages", "custom"]
HTML_503 = "<html><head><title>503 Service Unavailable</title></head><body>nginx</body></html>"


class Session:
    """Turns of one thread through the compiled graph on SQLite, keeping what each turn streamed."""

    def __init__(self, saver: BaseCheckpointSaver, context: AgentContext) -> None:
        self.graph = build_graph(saver)
        self.context = context
        self.config: dict[str, Any] = {"configurable": {"thread_id": "endpoint-thread"}}
        self.turn = 0
        self.events: list[tuple[str, Any]] = []

    def send(self, message: str, context: AgentContext | None = None) -> dict:
        context = context or self.context
        self.turn += 1
        human = HumanMessage(message, id=new_message_id("human"))
        self.events = list(
            self.graph.stream(
                turn_input(human, self.turn),
                {**self.config, "recursion_limit": recursion_limit(context)},
                context=context,
                durability="sync",
                stream_mode=STREAM_MODES,
            )
        )
        return self.graph.get_state(self.config).values

    def retries(self) -> list[dict]:
        return [e for mode, e in self.events if mode == "custom" and e["type"] == "retry"]

    def tokens(self) -> list[str]:
        return [
            chunk.content
            for mode, (chunk, meta) in (e for e in self.events if e[0] == "messages")
            if isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "agent"
            if chunk.content
        ]

    def path(self) -> list[str]:
        return [  # an empty update changed nothing: not a step of the path
            node for mode, data in self.events if mode == "updates" for node, u in data.items() if u
        ]


@pytest.fixture(autouse=True)
def api_key(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


@pytest.fixture
def slept() -> list[float]:
    return []


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[BaseCheckpointSaver]:
    with open_checkpointer(tmp_path / "db" / "agent.sqlite") as saver:
        yield saver


@pytest.fixture
def make_context(tmp_path: Path, slept: list[float]) -> Any:
    def make(model: BaseChatModel) -> AgentContext:
        return AgentContext(
            model=model,
            tools=default_tools(tmp_path / "ws"),
            system_prompt=SYSTEM_PROMPT,
            max_retries=MAX_RETRIES,
            backoff_base=0,
            sleep=slept.append,
        )

    return make


@pytest.fixture
def session(openai_server: OpenAIServer, saver: BaseCheckpointSaver, make_context: Any) -> Session:
    """The model exactly as the CLI builds it for `--model openai:test-model` (streaming)."""
    model = make_chat_model("openai:test-model", timeout=TIMEOUT, base_url=openai_server.base_url)
    return Session(saver, make_context(model))


def unstreamed_model(base_url: str) -> ChatOpenAI:
    return ChatOpenAI(
        model="test-model",
        base_url=base_url,
        timeout=TIMEOUT,
        max_retries=0,
        streaming=False,
        use_responses_api=False,
    )


def answer(values: dict) -> str:
    last = values["messages"][-1]
    assert isinstance(last, AIMessage), last
    return str(last.content)


def retry_summary(session: Session) -> list[tuple[int, int, float, str]]:
    return [(e["attempt"], e["max_attempts"], e["wait"], e["kind"]) for e in session.retries()]


def assert_valid_for_openai(messages: list[dict]) -> None:
    """Every assistant tool call is answered by a tool message before anything else is said."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, message
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, f"unanswered tool calls {open_calls} before {message}"
        open_calls = {c["id"] for c in message.get("tool_calls") or []}
    assert not open_calls, f"unanswered tool calls {open_calls} at the end"


def assert_next_turn_works(
    session: Session, server: OpenAIServer, context: AgentContext | None = None
) -> None:
    before = len(server.completions)
    server.add(text("Still here."))

    values = session.send("are you still there?", context)

    assert (values["status"], answer(values)) == ("answered", "Still here.")
    assert len(server.completions) == before + 1
    sent = server.completions[-1].messages
    assert sent[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert sent[-1] == {"role": "user", "content": "are you still there?"}
    # The system prompt plus all but the new answer, less Waypoint's own notices (failure panels,
    # budget messages): the model is never told it said those.
    notices = [m for m in values["messages"] if is_notice(m)]
    assert len(sent) == len(values["messages"]) - len(notices)
    assert not [m for m in sent if any(str(n.content) in str(m["content"]) for n in notices)]
    assert_valid_for_openai(sent)
    server.assert_done()


# --- answers and tool calls --------------------------------------------------------------------


def test_plain_answer_streams_tokens(session: Session, openai_server: OpenAIServer) -> None:
    openai_server.add(
        text(
            "Hello from the endpoint.", chunks=4, usage={"prompt_tokens": 9, "completion_tokens": 5}
        )
    )

    values = session.send("hello")

    assert (values["status"], answer(values)) == ("answered", "Hello from the endpoint.")
    assert session.tokens() == ["Hello ", "from t", "he end", "point."]
    [request] = openai_server.completions
    assert request.stream is True
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.body["model"] == "test-model"
    assert request.messages == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "hello"},
    ]
    assert [t["function"]["name"] for t in request.body["tools"]] == TOOL_NAMES
    usage = values["messages"][-1].usage_metadata
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (9, 5, 14)
    assert session.retries() == []
    assert_next_turn_works(session, openai_server)


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "not-streamed"])
def test_tool_call_then_answer(
    streaming: bool,
    openai_server: OpenAIServer,
    saver: BaseCheckpointSaver,
    make_context: Any,
) -> None:
    base_url = openai_server.base_url
    model = (
        make_chat_model("openai:test-model", timeout=TIMEOUT, base_url=base_url)
        if streaming
        else unstreamed_model(base_url)
    )
    session = Session(saver, make_context(model))
    openai_server.add(
        tool_calls(tool_call("calculator", {"expression": "2+3*4"}, "call_a")),
        text("It is 14."),
    )

    values = session.send("what is 2+3*4?")

    assert (values["status"], answer(values)) == ("answered", "It is 14.")
    assert session.path() == ["agent", "tools", "agent"]
    assert [r.stream for r in openai_server.completions] == [streaming, streaming]
    _, request, result, _ = values["messages"]
    assert request.tool_calls == [
        {"name": "calculator", "args": {"expression": "2+3*4"}, "id": "call_a", "type": "tool_call"}
    ]
    assert (result.tool_call_id, result.status, result.content) == ("call_a", "success", "14")
    sent = openai_server.completions[1].messages
    assert sent[-2]["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "2+3*4"}'},
        }
    ]
    assert sent[-1] == {"role": "tool", "content": "14", "tool_call_id": "call_a"}
    assert_next_turn_works(session, openai_server)


# --- transient faults: retried within the budget -----------------------------------------------


def test_rate_limit_honours_retry_after(
    session: Session, openai_server: OpenAIServer, slept: list[float]
) -> None:
    openai_server.add(
        error(429, "Rate limit reached", type="requests", headers={"Retry-After": "1"}),
        text("Answer after the wait."),
    )

    values = session.send("hello")

    assert (values["status"], answer(values)) == ("answered", "Answer after the wait.")
    assert len(openai_server.completions) == 2
    assert slept == [1.0]
    assert retry_summary(session) == [(1, MAX_RETRIES, 1.0, "model_transient")]
    assert session.retries()[0]["reason"].startswith("HTTP 429: ")
    assert "Rate limit reached" in session.retries()[0]["reason"]
    assert (values["retry_count"], values["last_error"]) == (0, None)
    assert_next_turn_works(session, openai_server)


def test_huge_retry_after_fails_fast(
    session: Session, openai_server: OpenAIServer, slept: list[float]
) -> None:
    never_needed = text("An answer an hour later.")
    openai_server.add(
        error(429, "Rate limit reached", type="requests", headers={"Retry-After": "3600"}),
        never_needed,
    )

    values = session.send("hello")

    assert slept == []
    assert len(openai_server.completions) == 1
    assert values["status"] == "failed"
    assert "rate limited; retry after 3600" in answer(values)
    assert openai_server.discard_unused() == [never_needed]
    assert_next_turn_works(session, openai_server)


def test_server_errors_are_retried_then_succeed(
    session: Session, openai_server: OpenAIServer, slept: list[float]
) -> None:
    openai_server.add(
        error(500, "The server had an error", type="server_error"),
        error(500, "The server had an error", type="server_error"),
        text("Third time lucky."),
    )

    values = session.send("hello")

    assert (values["status"], answer(values)) == ("answered", "Third time lucky.")
    assert len(openai_server.completions) == MAX_RETRIES + 1
    assert retry_summary(session) == [
        (1, MAX_RETRIES, 0, "model_transient"),
        (2, MAX_RETRIES, 0, "model_transient"),
    ]
    assert all(e["reason"].startswith("HTTP 500: ") for e in session.retries())
    assert session.path() == ["agent", "retry", "agent", "retry", "agent"]
    assert slept == []  # backoff_base=0: full jitter over [0, 0] never waits
    assert_next_turn_works(session, openai_server)


def test_server_errors_beyond_the_budget_fail_the_turn(
    session: Session, openai_server: OpenAIServer
) -> None:
    openai_server.add(*[error(500, "The server had an error", type="server_error")] * 3)

    values = session.send("hello")

    assert values["status"] == "failed"
    assert len(openai_server.completions) == MAX_RETRIES + 1
    assert answer(values).startswith(
        f"The model call kept failing after 3 attempts (retry budget {MAX_RETRIES}): HTTP 500: "
    )
    assert "The server had an error" in answer(values)
    assert [e["attempt"] for e in session.retries()] == [1, 2]
    assert session.path()[-1] == "failure_handler"
    assert_next_turn_works(session, openai_server)


def test_html_503_is_transient(session: Session, openai_server: OpenAIServer) -> None:
    openai_server.add(raw(503, HTML_503), text("Back again."))

    values = session.send("hello")

    assert (values["status"], answer(values)) == ("answered", "Back again.")
    assert len(openai_server.completions) == 2
    [retry] = session.retries()
    assert (retry["kind"], retry["reason"]) == ("model_transient", "HTTP 503: Error code: 503")
    assert_next_turn_works(session, openai_server)


def test_hang_times_out_and_is_retried(session: Session, openai_server: OpenAIServer) -> None:
    openai_server.add(hang(HANG_SECONDS), text("Sorry, I was slow."))
    started = time.monotonic()

    values = session.send("hello")

    elapsed = time.monotonic() - started
    assert (values["status"], answer(values)) == ("answered", "Sorry, I was slow.")
    assert TIMEOUT <= elapsed < HANG_SECONDS / 2  # the client gave up; the hang did not run out
    assert len(openai_server.completions) == 2
    [retry] = session.retries()
    assert (retry["kind"], retry["reason"]) == (
        "model_transient",
        "the model endpoint did not answer in time: no reply within 1 s (the request timeout; "
        "keep-alive comments do not count)",
    )
    assert_next_turn_works(session, openai_server)


def test_refused_connection_fails_after_the_retries(
    openai_server: OpenAIServer, saver: BaseCheckpointSaver, make_context: Any
) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    dead = make_chat_model(
        "openai:test-model", timeout=TIMEOUT, base_url=f"http://127.0.0.1:{closed_port}/v1"
    )
    session = Session(saver, make_context(dead))

    values = session.send("hello")

    assert values["status"] == "failed"
    assert values["iteration"] == MAX_RETRIES + 1  # one model call, one connection attempt each
    assert dead.max_retries == 0
    assert answer(values).startswith(
        f"The model call kept failing after 3 attempts (retry budget {MAX_RETRIES}): "
        "could not reach the model endpoint: Connection error."
    )
    assert [e["reason"] for e in session.retries()] == [
        "could not reach the model endpoint: Connection error."
    ] * MAX_RETRIES
    live = make_chat_model("openai:test-model", timeout=TIMEOUT, base_url=openai_server.base_url)
    assert_next_turn_works(session, openai_server, make_context(live))


# --- permanent faults: one attempt, an actionable message --------------------------------------


@pytest.mark.parametrize(
    ("status", "body_type", "code", "advice"),
    [
        (401, "invalid_request_error", "invalid_api_key", "check OPENAI_API_KEY"),
        (403, "invalid_request_error", None, "check the key's permissions"),
        (404, "invalid_request_error", "model_not_found", "not found; check --model"),
        (400, "invalid_request_error", None, "rejected the request as invalid"),
    ],
)
def test_permanent_errors_fail_at_once(
    status: int,
    body_type: str,
    code: str | None,
    advice: str,
    session: Session,
    openai_server: OpenAIServer,
    slept: list[float],
) -> None:
    not_needed = text("never sent")
    openai_server.add(error(status, "refused by the test", type=body_type, code=code), not_needed)

    values = session.send("hello")

    assert values["status"] == "failed"
    assert len(openai_server.completions) == 1
    assert session.retries() == [] and slept == []
    assert answer(values).startswith(
        f"The model call failed on the first attempt (retry budget {MAX_RETRIES}): HTTP {status}: "
    )
    assert advice in answer(values)
    assert "refused by the test" in answer(values)
    assert openai_server.discard_unused() == [not_needed]
    assert_next_turn_works(session, openai_server)


# --- invalid responses: transient, bounded -----------------------------------------------------


# A streamed step that brings nothing usable is asked once more unstreamed (app/models/openai_compat),
# so a streamed attempt is two HTTP requests; the unstreamed one says what was wrong.
@pytest.mark.parametrize(
    ("streaming", "reply", "detail"),
    [
        (True, raw(200, "<html>proxy login</html>"), "Unexpected response type"),
        (True, raw(200, "not json", "application/json"), "Expecting value"),
        (False, raw(200, "<html>proxy login</html>"), "Unexpected response type"),
        (False, raw(200, "not json", "application/json"), "Expecting value"),
        (False, empty_choices(), "the reply held no completion (its `choices` were empty)"),
    ],
    ids=["streamed-html", "streamed-bad-json", "html", "bad-json", "empty-choices"],
)
def test_invalid_response_is_retried(
    streaming: bool,
    reply: Any,
    detail: str,
    openai_server: OpenAIServer,
    saver: BaseCheckpointSaver,
    make_context: Any,
) -> None:
    base_url = openai_server.base_url
    model = (
        make_chat_model("openai:test-model", timeout=TIMEOUT, base_url=base_url)
        if streaming
        else unstreamed_model(base_url)
    )
    session = Session(saver, make_context(model))
    requests_per_attempt = 2 if streaming else 1
    openai_server.add(*[reply] * requests_per_attempt, text("A proper answer."))

    values = session.send("hello")

    assert (values["status"], answer(values)) == ("answered", "A proper answer.")
    assert len(openai_server.completions) == requests_per_attempt + 1
    [retry] = session.retries()
    assert retry["kind"] == "model_transient"
    assert retry["reason"].startswith("invalid response from endpoint: ")
    assert detail in retry["reason"]
    assert "index out of range" not in retry["reason"]  # the parser's words, not the user's
    assert_next_turn_works(session, openai_server)


def test_invalid_responses_beyond_the_budget_fail_the_turn(
    session: Session, openai_server: OpenAIServer
) -> None:
    attempts = MAX_RETRIES + 1
    openai_server.add(*[raw(200, "<html>proxy login</html>")] * 2 * attempts)

    values = session.send("hello")

    assert values["status"] == "failed"
    assert len(openai_server.completions) == 2 * attempts  # each streamed, then unstreamed
    assert answer(values).startswith(
        "The model call kept failing after 3 attempts (retry budget 2): "
        "invalid response from endpoint: "
    )
    assert_next_turn_works(session, openai_server)


def test_streamed_empty_choices_are_asked_again_unstreamed(
    session: Session, openai_server: OpenAIServer
) -> None:
    openai_server.add(empty_choices(), text("A proper answer."))

    values = session.send("hello")

    assert (values["status"], answer(values)) == ("answered", "A proper answer.")
    assert [r.stream for r in openai_server.completions] == [True, False]
    assert session.retries() == []


# --- what the model sends wrong ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("streaming", "told"),
    [
        # langchain repairs streamed partial JSON: "{bad" arrives as a call with args {}.
        (True, "invalid arguments for calculator"),
        # Unstreamed, the call lands in invalid_tool_calls with the raw text.
        (False, "the call to 'calculator' could not be parsed"),
    ],
    ids=["streamed", "not-streamed"],
)
def test_malformed_tool_call_is_answered_and_the_model_corrects_itself(
    streaming: bool,
    told: str,
    openai_server: OpenAIServer,
    saver: BaseCheckpointSaver,
    make_context: Any,
) -> None:
    base_url = openai_server.base_url
    model = (
        make_chat_model("openai:test-model", timeout=TIMEOUT, base_url=base_url)
        if streaming
        else unstreamed_model(base_url)
    )
    session = Session(saver, make_context(model))
    openai_server.add(
        tool_calls(tool_call("calculator", "{bad", "call_bad")),
        tool_calls(tool_call("calculator", {"expression": "6*7"}, "call_good")),
        text("6*7 is 42."),
    )

    values = session.send("what is 6*7?")

    assert (values["status"], answer(values)) == ("answered", "6*7 is 42.")
    assert len(openai_server.completions) == 3
    assert session.path() == ["agent", "tools", "retry", "agent", "tools", "agent"]
    assert [(e["attempt"], e["kind"]) for e in session.retries()] == [(1, "tool")]
    error_result = openai_server.completions[1].messages[-1]
    assert (error_result["role"], error_result["tool_call_id"]) == ("tool", "call_bad")
    assert error_result["content"].startswith(told)
    results = [m for m in values["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in results] == [
        ("call_bad", "error"),
        ("call_good", "success"),
    ]
    assert results[1].content == "42"
    assert_next_turn_works(session, openai_server)


def test_tool_call_cut_off_by_the_token_limit_is_not_run(
    session: Session, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    cut_off = '{"path": "notes.txt", "content": "Meeting moved to Thurs'
    openai_server.add(
        tool_calls(tool_call("write_file", cut_off, "call_w"), finish_reason="length"),
        text("My note was cut off; please ask again."),
    )

    values = session.send("save my note")

    assert not (tmp_path / "ws" / "notes.txt").exists()
    result = next(m for m in values["messages"] if isinstance(m, ToolMessage))
    assert (result.tool_call_id, result.status) == ("call_w", "error")


def test_length_cut_answer_is_kept_and_the_turn_ends_answered(
    session: Session, openai_server: OpenAIServer
) -> None:
    # Waypoint does not treat finish_reason="length" specially: the truncated text is the answer,
    # its metadata says why it stopped, and it is sent back as history next turn.
    openai_server.add(text("The three largest cities are Tokyo, Del", finish_reason="length"))

    values = session.send("name the three largest cities")

    assert (values["status"], answer(values)) == (
        "answered",
        "The three largest cities are Tokyo, Del",
    )
    assert values["messages"][-1].response_metadata["finish_reason"] == "length"
    assert len(openai_server.completions) == 1
    assert session.retries() == []
    assert_next_turn_works(session, openai_server)
    assert openai_server.completions[-1].messages[-2] == {
        "role": "assistant",
        "content": "The three largest cities are Tokyo, Del",
    }


def test_context_length_exceeded_summarises_then_retries(
    session: Session, openai_server: OpenAIServer
) -> None:
    openai_server.add(
        tool_calls(tool_call("calculator", {"expression": "2+2"}, "call_a")), text("It is 4.")
    )
    session.send("what is 2+2?")
    openai_server.add(
        error(
            400,
            "This model's maximum context length is 8192 tokens.",
            type="invalid_request_error",
            code="context_length_exceeded",
        ),
        text("Summary: the user asked for 2+2, which is 4."),
        text("And 4+4 is 8."),
    )

    values = session.send("and 4+4?")

    assert (values["status"], answer(values)) == ("answered", "And 4+4 is 8.")
    assert session.path() == ["agent", "summarize", "agent"]
    overflowed, summarised, retried = openai_server.completions[2:]
    assert overflowed.outcome == "error"
    assert "user: what is 2+2?" in str(summarised.messages)  # the older turn, as a transcript
    assert len(retried.messages) < len(overflowed.messages)
    assert retried.messages[-1] == {"role": "user", "content": "and 4+4?"}
    assert any("Summary: the user asked" in str(m["content"]) for m in retried.messages)
    assert all(m["role"] != "tool" for m in retried.messages)
    assert_next_turn_works(session, openai_server)


# --- the CLI against the endpoint --------------------------------------------------------------


def test_cli_answers_from_the_endpoint(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.add(text("Hello from the endpoint."))

    result = run_cli("chat", "-t", "t", "-m", "hello", "--model", "openai:test-model")

    assert (result.returncode, result.stdout.decode()) == (0, "Hello from the endpoint.\n")
    [request] = openai_server.completions
    assert request.messages[-1] == {"role": "user", "content": "hello"}
    assert request.headers["authorization"] == "Bearer test-key"


def test_cli_reports_a_rejected_key_and_the_thread_goes_on(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.add(
        error(
            401, "Incorrect API key provided", type="invalid_request_error", code="invalid_api_key"
        )
    )

    failed = run_cli("chat", "-t", "t", "-m", "hello", "--model", "openai:test-model")

    stderr = failed.stderr.decode()
    assert (failed.returncode, failed.stdout.decode()) == (1, "")
    assert "check OPENAI_API_KEY" in stderr
    assert "Incorrect API key provided" in stderr
    assert "error: turn 1 of thread t failed" in stderr
    assert "Traceback" not in stderr
    assert len(openai_server.completions) == 1

    openai_server.add(text("Key accepted now."))
    again = run_cli("chat", "-t", "t", "-m", "hello again", "--model", "openai:test-model")

    assert (again.returncode, again.stdout.decode()) == (0, "Key accepted now.\n")
    sent = openai_server.completions[-1].messages
    assert [m["role"] for m in sent] == ["system", "user", "user"]  # no failure text as the model's
    assert "check OPENAI_API_KEY" not in str(sent)
    openai_server.assert_done()


def test_cli_react_protocol_with_a_correction(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.add(
        text("Thought: I need the calculator\nAction: calculator\nAction Input: {oops"),
        text('Thought: fixed\nAction: calculator\nAction Input: {"expression": "6*7"}'),
        text("Thought: done\nFinal Answer: 6 times 7 is 42."),
    )

    result = run_cli(
        "chat",
        "-t",
        "r",
        "--tool-protocol",
        "react",
        "--model",
        "openai:m",
        "-m",
        "what is 6 times 7?",
    )

    assert (result.returncode, result.stdout.decode()) == (0, "6 times 7 is 42.\n")
    # the malformed call's card shows the correction; a tool error is no retry line
    assert "✗ calculator" in result.stderr.decode() and "retry" not in result.stderr.decode()
    requests = openai_server.completions
    assert len(requests) == 3
    assert all("tools" not in r.body for r in requests)  # no native tool calling is used
    assert "Action Input" in requests[0].messages[0]["content"]  # the protocol is in the prompt
    assert "calculator" in requests[0].messages[0]["content"]
    assert requests[2].messages[-1]["content"] == "Observation: 42"
    assert requests[1].messages[-1]["role"] == "user"  # the parse error went back as an observation
