"""The compiled graph end to end: a scripted model, real tools and an in-memory checkpointer."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

import graphs.shared.closing
import graphs.shared.recovery
from graphs.react.graph import build_graph, recursion_limit
from graphs.shared.closing import FINAL_ANSWER_INSTRUCTION
from graphs.shared.messages import call_signature
from graphs.state import AgentContext, turn_input
from tests.fakes import TOOL_NAMES, ScriptedChatModel, ai_calls, call
from tools import default_tools
from tools.errors import ToolError
from tools.weather import get_weather

PROMPT = "You are Waypoint, a careful assistant."
VALID_TOOLS = ", ".join(sorted(TOOL_NAMES))  # as the errors list them


class Turns:
    """Runs turns of one thread and keeps what the graph streamed."""

    def __init__(self, ctx: AgentContext, thread_id: str = "thread-1") -> None:
        self.ctx = ctx
        self.graph = build_graph(InMemorySaver())
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": recursion_limit(ctx),
        }
        self.turn = 0
        self.events: list[tuple[str, Any]] = []

    def send(self, text: str) -> dict:
        self.turn += 1
        human = HumanMessage(text, id=f"human-{self.turn}")
        self.events = list(
            self.graph.stream(
                turn_input(human, self.turn),
                self.config,
                context=self.ctx,
                durability="sync",
                stream_mode=["updates", "custom"],
            )
        )
        return self.graph.get_state(self.config).values

    def invoke(self, text: str) -> dict:
        self.turn += 1
        human = HumanMessage(text, id=f"human-{self.turn}")
        return self.graph.invoke(
            turn_input(human, self.turn), self.config, context=self.ctx, durability="sync"
        )

    def custom(self, kind: str) -> list[dict]:
        return [data for mode, data in self.events if mode == "custom" and data["type"] == kind]

    def updates(self) -> list[tuple[str, dict]]:
        return [
            (node, update)
            for mode, data in self.events
            if mode == "updates"
            for node, update in data.items()
            if update  # an empty update changed nothing: not a step of the path
        ]

    def path(self) -> list[str]:
        return [node for node, _ in self.updates()]


@pytest.fixture
def tools(tmp_path: Path) -> list[BaseTool]:
    return default_tools(tmp_path / "ws")


def context(model: ScriptedChatModel, tools: list[BaseTool], **limits: Any) -> AgentContext:
    limits.setdefault("backoff_base", 0)
    limits.setdefault("sleep", _no_sleep)
    return AgentContext(model=model, tools=tools, system_prompt=PROMPT, **limits)


def _no_sleep(seconds: float) -> None:
    raise AssertionError(f"the graph slept {seconds}s with no backoff configured")


def tool_result(content: str, call_id: str, name: str, status: str = "success") -> dict:
    return {"content": content, "tool_call_id": call_id, "name": name, "status": status}


def as_result(message: AnyMessage) -> dict:
    assert isinstance(message, ToolMessage), message
    return tool_result(message.content, message.tool_call_id, message.name, message.status)


def counters(values: dict) -> dict:
    keys = ("turn", "iteration", "retry_count", "last_error", "call_signatures", "status")
    return {key: values.get(key) for key in keys}


def assert_no_dangling_calls(messages: list[AnyMessage]) -> None:
    asked = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    asked += [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.invalid_tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(asked) == sorted(answered)


def rate_limit(retry_after: str) -> openai.RateLimitError:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(429, headers={"retry-after": retry_after}, request=request)
    return openai.RateLimitError("rate limited", response=response, body=None)


def auth_error() -> openai.AuthenticationError:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(401, request=request)
    return openai.AuthenticationError("Incorrect API key", response=response, body=None)


# --- answers and tool calls --------------------------------------------------------------------


def test_plain_answer(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(script=["Hello there."])
    turns = Turns(context(model, tools))

    values = turns.invoke("hi")

    assert counters(values) == {
        "turn": 1,
        "iteration": 1,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": [],
        "status": "answered",
    }
    assert [(type(m), m.content) for m in values["messages"]] == [
        (HumanMessage, "hi"),
        (AIMessage, "Hello there."),
    ]
    assert model.calls == [[SystemMessage(PROMPT), HumanMessage("hi", id="human-1")]]
    assert model.bound == [TOOL_NAMES]
    model.assert_done()


def test_tool_call_then_answer(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(
        script=[ai_calls(call("calculator", {"expression": "2+3*4"}, "c1")), "It is 14."]
    )
    turns = Turns(context(model, tools))

    values = turns.send("what is 2+3*4?")

    human, request, result, answer = values["messages"]
    assert request.tool_calls == [call("calculator", {"expression": "2+3*4"}, "c1")]
    assert as_result(result) == tool_result("14", "c1", "calculator")
    assert answer.content == "It is 14."
    assert counters(values) == {
        "turn": 1,
        "iteration": 2,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": ['calculator:{"expression": "2+3*4"}'],
        "status": "answered",
    }
    assert turns.path() == ["agent", "tools", "agent"]
    assert model.calls[1] == [SystemMessage(PROMPT), human, request, result]
    assert turns.custom("tool_call") == [
        {"type": "tool_call", "id": "c1", "name": "calculator", "args": {"expression": "2+3*4"}}
    ]
    [event] = turns.custom("tool_result")
    assert {k: event[k] for k in ("id", "name", "status", "content")} == {
        "id": "c1",
        "name": "calculator",
        "status": "success",
        "content": "14",
    }
    assert event["duration_ms"] >= 0
    model.assert_done()


def test_calls_of_one_message_run_concurrently_and_answer_in_order(
    tools: list[BaseTool],
) -> None:
    second_done = threading.Event()

    @tool
    def handshake(side: str) -> str:
        """Meet the other side of the handshake."""
        if side == "second":
            second_done.set()
            return "second done"
        # The first call can only finish while the second one runs: proof of concurrency.
        if not second_done.wait(timeout=5):
            raise RuntimeError("the calls ran one after another")
        return "first done"

    paris = {"city": "Paris", "date": "today"}
    request = ai_calls(
        call("handshake", {"side": "first"}, "a"),
        call("calculator", {"expression": "6*7"}, "b"),
        call("handshake", {"side": "second"}, "c"),
        call("get_weather", paris, "d"),
    )
    model = ScriptedChatModel(script=[request, "All four done."])
    turns = Turns(context(model, [*tools, handshake]))

    values = turns.send("do four things")

    assert [as_result(m) for m in values["messages"][2:6]] == [
        tool_result("first done", "a", "handshake"),
        tool_result("42", "b", "calculator"),
        tool_result("second done", "c", "handshake"),
        tool_result(get_weather.invoke(paris), "d", "get_weather"),
    ]
    assert values["messages"][6].content == "All four done."
    assert values["status"] == "answered"
    assert values["call_signatures"] == [
        'handshake:{"side": "first"}',
        'calculator:{"expression": "6*7"}',
        'handshake:{"side": "second"}',
        'get_weather:{"city": "Paris", "date": "today"}',
    ]
    model.assert_done()


# --- tool errors and retries -------------------------------------------------------------------


def test_tool_error_is_retried_and_the_model_recovers(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(
        script=[
            ai_calls(call("get_weather", {"city": "Atlantis"}, "c1")),
            ai_calls(call("get_weather", {"city": "Paris"}, "c2")),
            "Paris it is.",
        ]
    )
    turns = Turns(context(model, tools))

    values = turns.send("weather in Atlantis?")

    [retry] = turns.custom("retry")
    assert retry["attempt"] == 1
    assert retry["max_attempts"] == 3
    assert retry["wait"] == 0
    assert retry["kind"] == "tool"
    assert retry["reason"].startswith("get_weather: city 'Atlantis' is not in the offline")
    seen_error = model.calls[1][-1]
    assert isinstance(seen_error, ToolMessage)
    assert (seen_error.tool_call_id, seen_error.status) == ("c1", "error")
    assert seen_error.content.startswith("city 'Atlantis' is not in the offline weather dataset")
    assert turns.path() == ["agent", "tools", "retry", "agent", "tools", "agent"]
    retry_counts = [u["retry_count"] for _, u in turns.updates() if "retry_count" in u]
    assert retry_counts == [1, 0]  # set by retry, reset by the next successful tools step
    assert as_result(values["messages"][4]) == tool_result(
        get_weather.invoke({"city": "Paris"}), "c2", "get_weather"
    )
    assert counters(values) == {
        "turn": 1,
        "iteration": 3,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": ['get_weather:{"city": "Atlantis"}', 'get_weather:{"city": "Paris"}'],
        "status": "answered",
    }
    model.assert_done()


def test_tool_errors_beyond_the_budget_fail_the_turn(tools: list[BaseTool]) -> None:
    runs: list[int] = []

    @tool
    def flaky(n: int) -> str:
        """A service that is always down."""
        runs.append(n)
        raise ToolError("the service is down; try again later")

    model = ScriptedChatModel(
        script=[ai_calls(call("flaky", {"n": n}, f"c{n}")) for n in (1, 2, 3)]
    )
    turns = Turns(context(model, [*tools, flaky], max_retries=2))

    values = turns.send("use flaky")

    assert runs == [1, 2, 3]  # max_retries + 1 attempts
    assert turns.path() == [
        "agent",
        "tools",
        "retry",
        "agent",
        "tools",
        "retry",
        "agent",
        "tools",
        "failure_handler",
    ]
    assert [e["attempt"] for e in turns.custom("retry")] == [1, 2]
    final = values["messages"][-1]
    assert isinstance(final, AIMessage)
    assert final.tool_calls == []
    assert final.content == (
        "The tool calls kept failing after 3 attempts (retry budget 2): "
        "flaky: the service is down; try again later\n"
        "Rephrase the request, or check the file names and values it uses."
    )
    assert values["status"] == "failed"
    assert values["retry_count"] == 2
    assert values["iteration"] == 3
    assert len(values["messages"]) == 1 + 3 * 2 + 1
    assert_no_dangling_calls(values["messages"])
    model.assert_done()


# --- model errors ------------------------------------------------------------------------------


def test_transient_model_errors_back_off_with_the_injected_sleep(
    tools: list[BaseTool], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Full jitter draws from [0, ceiling]; take the ceiling so the exponential shape is visible.
    monkeypatch.setattr(graphs.shared.recovery.random, "uniform", lambda low, high: high)
    slept: list[float] = []
    model = ScriptedChatModel(
        script=[TimeoutError("read timed out"), TimeoutError("read timed out"), "Finally."]
    )
    turns = Turns(context(model, tools, backoff_base=0.5, backoff_cap=8.0, sleep=slept.append))

    values = turns.send("hello?")

    assert slept == [0.5, 1.0]
    assert turns.custom("retry") == [
        {
            "type": "retry",
            "attempt": attempt,
            "max_attempts": 3,
            "wait": wait,
            "kind": "model_transient",
            "reason": "the model endpoint did not answer in time: read timed out",
        }
        for attempt, wait in ((1, 0.5), (2, 1.0))
    ]
    assert turns.path() == ["agent", "retry", "agent", "retry", "agent"]
    assert counters(values) == {
        "turn": 1,
        "iteration": 3,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": [],
        "status": "answered",
    }
    assert [(type(m), m.content) for m in values["messages"]] == [
        (HumanMessage, "hello?"),
        (AIMessage, "Finally."),
    ]
    assert len(model.calls) == 3
    assert all(seen == model.calls[0] for seen in model.calls)
    model.assert_done()


def test_backoff_jitter_stays_under_the_exponential_ceiling(tools: list[BaseTool]) -> None:
    slept: list[float] = []
    model = ScriptedChatModel(
        script=[TimeoutError("t"), TimeoutError("t"), TimeoutError("t"), "ok"]
    )
    turns = Turns(context(model, tools, backoff_base=0.5, backoff_cap=0.75, sleep=slept.append))

    values = turns.send("hello?")

    assert values["status"] == "answered"
    assert len(slept) == 3
    assert [0 < s <= c for s, c in zip(slept, (0.5, 0.75, 0.75), strict=True)] == [True] * 3
    assert [e["wait"] for e in turns.custom("retry")] == [round(s, 3) for s in slept]


def test_retry_after_is_a_floor_for_the_backoff(tools: list[BaseTool]) -> None:
    slept: list[float] = []
    model = ScriptedChatModel(script=[rate_limit("2"), "Done."])
    turns = Turns(context(model, tools, backoff_base=0.5, sleep=slept.append))

    values = turns.send("hello?")

    assert slept == [2.0]
    [retry] = turns.custom("retry")
    assert (retry["attempt"], retry["wait"], retry["kind"]) == (1, 2.0, "model_transient")
    assert retry["reason"] == "HTTP 429: rate limited"
    assert values["status"] == "answered"
    assert values["retry_count"] == 0
    model.assert_done()


@pytest.mark.parametrize("make_error", [auth_error, lambda: _status_error(401)])
def test_fatal_model_error_fails_at_once(tools: list[BaseTool], make_error: Any) -> None:
    slept: list[float] = []
    model = ScriptedChatModel(script=[make_error()])
    turns = Turns(context(model, tools, backoff_base=0.5, sleep=slept.append))

    values = turns.send("hello?")

    assert turns.path() == ["agent", "failure_handler"]
    assert turns.custom("retry") == []
    assert slept == []
    assert len(model.calls) == 1
    final = values["messages"][-1]
    assert final.content.startswith(
        "The model call failed on the first attempt (retry budget 3): HTTP 401: "
        "the endpoint rejected the credentials; check OPENAI_API_KEY"
    )
    assert final.content.endswith(
        "Fix the model configuration (see: waypoint chat --help), then send your message again."
    )
    assert values["status"] == "failed"
    assert values["last_error"]["kind"] == "model_fatal"
    assert (values["iteration"], values["retry_count"]) == (1, 0)
    assert len(values["messages"]) == 2


def _status_error(status: int) -> Exception:
    exc = RuntimeError("unauthorized")
    exc.status_code = status  # type: ignore[attr-defined]
    return exc


def test_transient_model_errors_beyond_the_budget_fail_the_turn(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(script=[TimeoutError("down")] * 3)
    turns = Turns(context(model, tools, max_retries=2))

    values = turns.send("hello?")

    assert turns.path() == ["agent", "retry", "agent", "retry", "agent", "failure_handler"]
    assert values["status"] == "failed"
    assert values["messages"][-1].content == (
        "The model call kept failing after 3 attempts (retry budget 2): "
        "the model endpoint did not answer in time: down\n"
        "Check that the model endpoint is up, then send your message again."
    )
    model.assert_done()


# --- loop detection and the step budget --------------------------------------------------------


def test_third_identical_call_is_a_loop(tools: list[BaseTool]) -> None:
    runs: list[str] = []

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        runs.append(query)
        return f"nothing new about {query}"

    same = {"query": "x"}
    model = ScriptedChatModel(
        script=[
            ai_calls(call("lookup", same, "c1")),
            ai_calls(call("lookup", same, "c2")),
            ai_calls(call("lookup", same, "c3")),
            "I found nothing new about x.",
        ]
    )
    turns = Turns(context(model, [*tools, lookup]))

    values = turns.send("look up x")

    assert runs == ["x", "x"]
    assert turns.path() == ["agent", "tools", "agent", "tools", "agent", "finalize"]
    assert len(model.bound) == 3  # the agent binds tools; finalize calls the unbound model
    assert len(model.calls) == 4
    last_call = model.calls[3]
    assert last_call[-1] == SystemMessage(FINAL_ANSWER_INSTRUCTION)
    assert as_result(last_call[-2]) == tool_result(
        "not run: stopped by a repeated identical tool call", "c3", "lookup", "error"
    )
    closing, answer = values["messages"][-2:]
    assert as_result(closing) == as_result(last_call[-2])
    assert isinstance(answer, AIMessage)
    assert (answer.content, answer.tool_calls) == ("I found nothing new about x.", [])
    assert counters(values) == {
        "turn": 1,
        "iteration": 3,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": ['lookup:{"query": "x"}'] * 2,
        "status": "loop_detected",
    }
    assert_no_dangling_calls(values["messages"])
    model.assert_done()


def test_step_budget_ends_with_one_last_answer(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(
        script=[
            ai_calls(call("calculator", {"expression": "1+1"}, "c1")),
            ai_calls(call("calculator", {"expression": "2+2"}, "c2")),
            "So far: 2 and 4.",
        ]
    )
    turns = Turns(context(model, tools, max_iterations=2))

    values = turns.send("keep going")

    assert turns.path() == ["agent", "tools", "agent", "tools", "finalize"]
    assert len(model.bound) == 2
    assert model.calls[2][-1] == SystemMessage(FINAL_ANSWER_INSTRUCTION)
    assert model.calls[2][:-1] == [SystemMessage(PROMPT), *values["messages"][:-1]]
    assert values["messages"][-1].content == "So far: 2 and 4."
    assert values["status"] == "max_iterations"
    assert values["iteration"] == 2
    assert len(values["messages"]) == 6
    model.assert_done()


def test_step_budget_falls_back_when_the_last_call_fails(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(
        script=[
            ai_calls(call("calculator", {"expression": "1+1"}, "c1")),
            ai_calls(call("calculator", {"expression": "2+2"}, "c2")),
            RuntimeError("endpoint down"),
        ]
    )
    turns = Turns(context(model, tools, max_iterations=2))

    values = turns.send("keep going")

    assert values["messages"][-1].content == (
        "I stopped because of the step budget. What was done so far:\n"
        "- calculator: 2\n"
        "- calculator: 4"
    )
    assert values["status"] == "max_iterations"
    model.assert_done()


def test_step_budget_wins_over_alternating_model_and_tool_failures(
    tools: list[BaseTool],
) -> None:
    # A model success after a model error resets retry_count, so only the step budget ends this.
    model = ScriptedChatModel(
        script=[
            ai_calls(call("get_weather", {"city": "Atlantis"}, "c1")),
            TimeoutError("t"),
            ai_calls(call("get_weather", {"city": "Lemuria"}, "c2")),
            TimeoutError("t"),
            ai_calls(call("get_weather", {"city": "Mu"}, "c3")),
            "Nothing found.",
        ]
    )
    turns = Turns(context(model, tools, max_iterations=4, max_retries=2))

    values = turns.send("weather?")

    assert turns.path() == [
        "agent",
        "tools",
        "retry",
        "agent",
        "retry",
        "agent",
        "tools",
        "retry",
        "agent",
        "retry",
        "agent",
        "tools",
        "finalize",
    ]
    assert values["status"] == "max_iterations"
    assert values["iteration"] == 5
    assert len(model.calls) == 6
    assert values["messages"][-1].content == "Nothing found."
    assert_no_dangling_calls(values["messages"])
    model.assert_done()


# --- calls the model got wrong -----------------------------------------------------------------


BAD_JSON_CALL = {
    "name": "calculator",
    "args": "{bad json",
    "id": "x",
    "error": "Expecting value",
    "type": "invalid_tool_call",
}


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (
            AIMessage(content="", invalid_tool_calls=[BAD_JSON_CALL]),
            tool_result(
                "the call to 'calculator' could not be parsed (Expecting value); raw arguments: "
                "'{bad json'. Send the call again with the arguments as one JSON object. "
                f"Valid tools: {VALID_TOOLS}.",
                "x",
                "calculator",
                "error",
            ),
        ),
        (
            ai_calls(call("search_web", {"query": "6*7"}, "x")),
            tool_result(
                f"there is no tool named 'search_web'. Valid tools: {VALID_TOOLS}.",
                "x",
                "search_web",
                "error",
            ),
        ),
        (
            ai_calls(call("calculator", {"expr": "6*7"}, "x")),
            tool_result(
                "invalid arguments for calculator: expression: Field required. "
                "Expected arguments: expression (string).",
                "x",
                "calculator",
                "error",
            ),
        ),
        (
            ai_calls(call("calculator", {"expression": 42}, "x")),
            tool_result(
                "invalid arguments for calculator: expression: Input should be a valid string. "
                "Expected arguments: expression (string).",
                "x",
                "calculator",
                "error",
            ),
        ),
    ],
    ids=["invalid-json", "unknown-tool", "missing-field", "wrong-type"],
)
def test_malformed_call_is_answered_and_the_model_corrects_itself(
    tools: list[BaseTool], request_: AIMessage, expected: dict
) -> None:
    model = ScriptedChatModel(
        script=[request_, ai_calls(call("calculator", {"expression": "6*7"}, "y")), "42."]
    )
    turns = Turns(context(model, tools))

    values = turns.send("6*7?")

    assert as_result(values["messages"][2]) == expected
    assert model.calls[1][-1] == values["messages"][2]
    assert [(e["attempt"], e["kind"]) for e in turns.custom("retry")] == [(1, "tool")]
    assert as_result(values["messages"][4]) == tool_result("42", "y", "calculator")
    assert turns.path() == ["agent", "tools", "retry", "agent", "tools", "agent"]
    assert (values["status"], values["retry_count"], values["iteration"]) == ("answered", 0, 3)
    assert_no_dangling_calls(values["messages"])
    model.assert_done()


def test_long_tool_result_is_truncated(tmp_path: Path) -> None:
    tools = default_tools(tmp_path / "ws")
    (tmp_path / "ws" / "big.txt").write_text("a" * 50)
    model = ScriptedChatModel(
        script=[ai_calls(call("read_file", {"path": "big.txt"}, "c1")), "It is long."]
    )
    turns = Turns(context(model, tools, max_tool_result_chars=20))

    values = turns.send("read big.txt")

    expected = "a" * 20 + "\n…[truncated: 30 more characters]"
    assert as_result(values["messages"][2]) == tool_result(expected, "c1", "read_file")
    assert turns.custom("tool_result")[0]["content"] == expected
    assert values["status"] == "answered"


# --- bugs and turns ----------------------------------------------------------------------------


def test_bug_in_a_tool_fails_the_turn_and_the_thread_goes_on(tools: list[BaseTool]) -> None:
    @tool
    def broken(x: int) -> str:
        """A tool with a bug."""
        raise RuntimeError("boom")

    model = ScriptedChatModel(script=[ai_calls(call("broken", {"x": 1}, "c1")), "Fine now."])
    turns = Turns(context(model, [*tools, broken]))

    values = turns.send("use broken")

    assert turns.path() == ["agent", "__default_error_handler__", "failure_handler"]
    [error] = turns.custom("error")
    assert error["node"] == "tools"
    assert "RuntimeError: boom" in error["traceback"]
    closing, final = values["messages"][-2:]
    assert as_result(closing) == tool_result("not run: the turn failed", "c1", "broken", "error")
    assert isinstance(final, AIMessage)
    assert "internal error" in final.content
    assert "tools: RuntimeError: boom" in final.content
    assert values["status"] == "failed"
    assert values["last_error"] == {
        "kind": "internal",
        "message": "tools: RuntimeError: boom",
        "retry_after": None,
    }
    assert_no_dangling_calls(values["messages"])

    values = turns.send("try again")

    assert turns.path() == ["agent"]
    assert counters(values) == {
        "turn": 2,
        "iteration": 1,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": [],
        "status": "answered",
    }
    assert values["messages"][-1].content == "Fine now."
    # The system prompt, the first turn without its failure notice (Waypoint's words, not the
    # model's), the new input.
    assert len(model.calls[1]) == 1 + 4
    assert "internal error" not in str(model.calls[1])
    model.assert_done()


def test_a_bug_in_the_failure_handler_ends_the_turn_instead_of_looping(
    tools: list[BaseTool], monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool
    def broken(x: int) -> str:
        """A tool with a bug."""
        raise RuntimeError("boom")

    def failure_text_with_a_bug(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("the handler broke")

    monkeypatch.setattr(graphs.shared.closing, "failure_text", failure_text_with_a_bug)
    model = ScriptedChatModel(script=[ai_calls(call("broken", {"x": 1}, "c1"))])
    turns = Turns(context(model, [*tools, broken]))

    values = turns.send("use broken")

    assert turns.path() == [
        "agent",
        "__default_error_handler__",
        "__default_error_handler__",  # the failure handler's own bug: the turn ends there
    ]
    assert values["status"] == "failed"
    assert values["last_error"]["message"] == "failure_handler: RuntimeError: the handler broke"
    final = values["messages"][-1]
    assert "another stopped its failure handler" in final.content
    assert_no_dangling_calls(values["messages"])


def test_each_turn_resets_the_counters(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(
        script=[
            ai_calls(call("calculator", {"expression": "1+1"}, "c1")),
            ai_calls(call("get_weather", {"city": "Atlantis"}, "c2")),
            "No weather for Atlantis; 1+1 is 2.",
            "Hi again.",
        ]
    )
    turns = Turns(context(model, tools))

    first = turns.send("two things")

    assert counters(first) == {
        "turn": 1,
        "iteration": 3,
        "retry_count": 1,
        "last_error": None,
        "call_signatures": ['calculator:{"expression": "1+1"}', 'get_weather:{"city": "Atlantis"}'],
        "status": "answered",
    }

    second = turns.send("hello")

    assert counters(second) == {
        "turn": 2,
        "iteration": 1,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": [],
        "status": "answered",
    }
    assert len(second["messages"]) == len(first["messages"]) + 2
    model.assert_done()


def test_call_signatures_use_the_canonical_form(tools: list[BaseTool]) -> None:
    model = ScriptedChatModel(
        script=[
            ai_calls(call("get_weather", {"unit": "celsius", "city": "Rome"}, "c1")),
            ai_calls(call("get_weather", {"city": "Rome", "unit": "celsius"}, "c2")),
            ai_calls(call("get_weather", {"unit": "celsius", "city": "Rome"}, "c3")),
            "Rome again.",
        ]
    )
    turns = Turns(context(model, tools))

    values = turns.send("Rome?")

    expected = call_signature("get_weather", {"city": "Rome", "unit": "celsius"})
    assert values["call_signatures"] == [expected, expected]
    assert values["status"] == "loop_detected"
