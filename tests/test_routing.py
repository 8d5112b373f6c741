"""Routers on plain dicts, loop detection, call signatures and the model-error classifier."""

from __future__ import annotations

import json
import typing
from types import SimpleNamespace

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graphs.react.routing import route_after_agent, route_after_tools
from graphs.shared.limits import is_looping
from graphs.shared.messages import call_signature
from graphs.shared.model_errors import classify_model_error
from graphs.state import AgentContext, LastError
from tests.fakes import ScriptedChatModel, ai_calls, call

MAX_RETRIES = 2
MAX_ITERATIONS = 4
RUNTIME = SimpleNamespace(
    context=AgentContext(
        model=ScriptedChatModel(), max_retries=MAX_RETRIES, max_iterations=MAX_ITERATIONS
    )
)
REQUEST = httpx.Request("POST", "http://x/v1/chat/completions")


def error(kind: str, message: str = "boom", retry_after: float | None = None) -> LastError:
    return LastError(kind=kind, message=message, retry_after=retry_after)  # type: ignore[typeddict-item]


def state(*messages, **fields) -> dict:
    return {"messages": [HumanMessage("hi", id="h1"), *messages], **fields}


def response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, request=REQUEST)


def sig(name: str, args: dict) -> str:
    return call_signature(name, args)


# --- route_after_agent -------------------------------------------------------------------------


def test_agent_with_tool_calls_goes_to_tools() -> None:
    reply = ai_calls(call("calculator", {"expression": "1+1"}))
    assert route_after_agent(state(reply, last_error=None), RUNTIME) == "tools"


def test_agent_with_only_invalid_tool_calls_goes_to_tools() -> None:
    reply = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "calculator",
                "args": "{bad",
                "id": "x",
                "error": "bad JSON",
                "type": "invalid_tool_call",
            }
        ],
    )
    assert route_after_agent(state(reply), RUNTIME) == "tools"


def test_agent_plain_answer_ends_the_turn() -> None:
    assert route_after_agent(state(AIMessage("hello"), last_error=None), RUNTIME) == "__end__"


@pytest.mark.parametrize("retry_count", [0, MAX_RETRIES - 1])
def test_agent_transient_error_within_budget_retries(retry_count: int) -> None:
    current = state(last_error=error("model_transient"), retry_count=retry_count)
    assert route_after_agent(current, RUNTIME) == "retry"


def test_agent_transient_error_without_counter_retries() -> None:
    assert route_after_agent(state(last_error=error("model_transient")), RUNTIME) == "retry"


@pytest.mark.parametrize(
    ("kind", "retry_count"),
    [
        ("model_transient", MAX_RETRIES),
        ("model_transient", MAX_RETRIES + 1),
        ("model_fatal", 0),
        ("context_overflow", 0),
    ],
)
def test_agent_error_goes_to_failure_handler(kind: str, retry_count: int) -> None:
    current = state(last_error=error(kind), retry_count=retry_count)
    assert route_after_agent(current, RUNTIME) == "failure_handler"


def test_agent_error_wins_over_a_stale_tool_call_reply() -> None:
    stale = ai_calls(call("calculator", {"expression": "1+1"}))
    current = state(stale, last_error=error("model_fatal"), retry_count=0)
    assert route_after_agent(current, RUNTIME) == "failure_handler"


def test_agent_third_identical_call_goes_to_finalize() -> None:
    args = {"city": "Paris", "unit": "celsius"}
    reply = ai_calls(call("get_weather", {"unit": "celsius", "city": "Paris"}, "c3"))
    current = state(reply, call_signatures=[sig("get_weather", args)] * 2)
    assert route_after_agent(current, RUNTIME) == "finalize"


def test_agent_second_identical_call_still_goes_to_tools() -> None:
    args = {"city": "Paris"}
    reply = ai_calls(call("get_weather", args, "c2"))
    current = state(reply, call_signatures=[sig("get_weather", args)])
    assert route_after_agent(current, RUNTIME) == "tools"


# --- route_after_tools -------------------------------------------------------------------------


def test_tools_all_ok_goes_back_to_agent() -> None:
    current = state(last_error=None, iteration=MAX_ITERATIONS - 1, retry_count=0)
    assert route_after_tools(current, RUNTIME) == "agent"


@pytest.mark.parametrize("retry_count", [0, MAX_RETRIES - 1])
def test_tools_error_within_budget_retries(retry_count: int) -> None:
    current = state(last_error=error("tool"), iteration=1, retry_count=retry_count)
    assert route_after_tools(current, RUNTIME) == "retry"


def test_tools_error_with_retries_used_up_goes_to_failure_handler() -> None:
    current = state(last_error=error("tool"), iteration=1, retry_count=MAX_RETRIES)
    assert route_after_tools(current, RUNTIME) == "failure_handler"


@pytest.mark.parametrize("iteration", [MAX_ITERATIONS, MAX_ITERATIONS + 1])
def test_tools_at_iteration_cap_goes_to_finalize(iteration: int) -> None:
    current = state(last_error=None, iteration=iteration, retry_count=0)
    assert route_after_tools(current, RUNTIME) == "finalize"


@pytest.mark.parametrize("retry_count", [0, MAX_RETRIES])
def test_tools_error_at_iteration_cap_goes_to_finalize(retry_count: int) -> None:
    # retry_count alone does not bound a turn, so the step budget must win over a tool error.
    current = state(last_error=error("tool"), iteration=MAX_ITERATIONS, retry_count=retry_count)
    assert route_after_tools(current, RUNTIME) == "finalize"


def test_router_literals_name_every_branch() -> None:
    after_agent = typing.get_type_hints(route_after_agent)["return"]
    after_tools = typing.get_type_hints(route_after_tools)["return"]
    assert set(typing.get_args(after_agent)) == {
        "tools",
        "retry",
        "summarize",
        "failure_handler",
        "finalize",
        "__end__",
    }
    assert set(typing.get_args(after_tools)) == {"agent", "retry", "failure_handler", "finalize"}


# --- is_looping and call_signature -------------------------------------------------------------


def test_is_looping_needs_two_earlier_identical_calls() -> None:
    reply = ai_calls(call("calculator", {"expression": "1+1"}))
    one = sig("calculator", {"expression": "1+1"})
    assert not is_looping(state(reply))
    assert not is_looping(state(reply, call_signatures=[]))
    assert not is_looping(state(reply, call_signatures=[one]))
    assert is_looping(state(reply, call_signatures=[one, one]))
    assert is_looping(state(reply, call_signatures=[one, "x:{}", one]))


def test_is_looping_compares_arguments() -> None:
    reply = ai_calls(call("calculator", {"expression": "2+2"}))
    other = sig("calculator", {"expression": "1+1"})
    assert not is_looping(state(reply, call_signatures=[other, other]))


def test_is_looping_when_any_call_of_the_message_repeats() -> None:
    repeated = {"expression": "1+1"}
    reply = ai_calls(call("get_weather", {"city": "Rome"}, "a"), call("calculator", repeated, "b"))
    seen = [sig("calculator", repeated)] * 2
    assert is_looping(state(reply, call_signatures=seen))


def test_is_looping_is_false_when_the_last_message_is_not_an_ai_message() -> None:
    one = sig("calculator", {"expression": "1+1"})
    result = ToolMessage("2", tool_call_id="c1", name="calculator")
    assert not is_looping(state(result, call_signatures=[one, one]))


def test_call_signature_ignores_argument_key_order() -> None:
    first = call_signature("get_weather", {"city": "Paris", "unit": "celsius", "date": "today"})
    second = call_signature("get_weather", {"date": "today", "unit": "celsius", "city": "Paris"})
    assert first == second
    assert first == 'get_weather:{"city": "Paris", "date": "today", "unit": "celsius"}'


def test_call_signature_sorts_nested_keys_and_keeps_unicode() -> None:
    first = call_signature("t", {"b": {"y": 1, "x": 2}, "a": "北京"})
    second = call_signature("t", {"a": "北京", "b": {"x": 2, "y": 1}})
    assert first == second == 't:{"a": "北京", "b": {"x": 2, "y": 1}}'


def test_call_signature_distinguishes_names_and_values() -> None:
    base = call_signature("calculator", {"expression": "1+1"})
    assert base != call_signature("calculator", {"expression": "1+2"})
    assert base != call_signature("other", {"expression": "1+1"})


# --- classify_model_error ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (
            TimeoutError("read timed out"),
            "the model endpoint did not answer in time: read timed out",
        ),
        (ConnectionError("refused"), "could not reach the model endpoint: refused"),
        (
            ConnectionResetError("reset by peer"),
            "could not reach the model endpoint: reset by peer",
        ),
        (
            openai.APITimeoutError(request=REQUEST),
            "the model endpoint did not answer in time: Request timed out.",
        ),
        (
            openai.APIConnectionError(request=REQUEST),
            "could not reach the model endpoint: Connection error.",
        ),
        (
            httpx.ConnectTimeout("connect timeout"),
            "the model endpoint did not answer in time: connect timeout",
        ),
    ],
)
def test_network_failures_are_transient(exc: BaseException, message: str) -> None:
    assert classify_model_error(exc) == error("model_transient", message)


def test_rate_limit_is_transient_with_retry_after() -> None:
    exc = openai.RateLimitError(
        "slow down", response=response(429, {"retry-after": "2"}), body=None
    )
    assert classify_model_error(exc) == error("model_transient", "HTTP 429: slow down", 2.0)


def test_retry_after_on_a_duck_typed_exception() -> None:
    exc = RuntimeError("too many requests")
    exc.status_code = 429  # type: ignore[attr-defined]
    exc.response = SimpleNamespace(headers={"retry-after": "1.5"})  # type: ignore[attr-defined]
    assert classify_model_error(exc) == error("model_transient", "HTTP 429: too many requests", 1.5)


@pytest.mark.parametrize("header", ["soon", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_unparseable_retry_after_is_ignored(header: str) -> None:
    exc = openai.RateLimitError("slow", response=response(429, {"retry-after": header}), body=None)
    assert classify_model_error(exc) == error("model_transient", "HTTP 429: slow", None)


def test_rate_limit_without_retry_after() -> None:
    exc = openai.RateLimitError("slow", response=response(429), body=None)
    assert classify_model_error(exc)["retry_after"] is None


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (openai.InternalServerError("oops", response=response(500), body=None), 500),
        (openai.InternalServerError("oops", response=response(503), body=None), 503),
        (openai.APIStatusError("oops", response=response(502), body=None), 502),
        (openai.ConflictError("oops", response=response(409), body=None), 409),
    ],
)
def test_server_errors_are_transient(exc: BaseException, status: int) -> None:
    assert classify_model_error(exc) == error("model_transient", f"HTTP {status}: oops")


@pytest.mark.parametrize(
    ("exc", "advice"),
    [
        (
            openai.AuthenticationError("bad key", response=response(401), body=None),
            "the endpoint rejected the credentials; check OPENAI_API_KEY",
        ),
        (
            openai.PermissionDeniedError("bad key", response=response(403), body=None),
            "the key is not allowed to use this model; check the key's permissions",
        ),
        (
            openai.NotFoundError("bad key", response=response(404), body=None),
            "the model or URL was not found; check --model and OPENAI_BASE_URL",
        ),
        (
            openai.BadRequestError("bad key", response=response(400), body=None),
            "the endpoint rejected the request as invalid",
        ),
        (
            openai.UnprocessableEntityError("bad key", response=response(422), body=None),
            "the endpoint refused the request",
        ),
    ],
)
def test_client_errors_are_fatal_with_advice(exc: openai.APIStatusError, advice: str) -> None:
    status = exc.status_code
    assert classify_model_error(exc) == error("model_fatal", f"HTTP {status}: {advice} (bad key)")


def test_duck_typed_401_is_fatal_and_mentions_the_key() -> None:
    exc = RuntimeError("unauthorized")
    exc.status_code = 401  # type: ignore[attr-defined]
    result = classify_model_error(exc)
    assert result["kind"] == "model_fatal"
    assert "OPENAI_API_KEY" in result["message"]


@pytest.mark.parametrize(
    "exc",
    [
        openai.BadRequestError(
            "maximum context length exceeded",
            response=response(400),
            body={"code": "context_length_exceeded", "message": "too long"},
        ),
        openai.BadRequestError(
            "maximum context length exceeded",
            response=response(400),
            body={"error": {"code": "context_length_exceeded"}},
        ),
        RuntimeError("Error code: 400 - {'code': 'context_length_exceeded'}"),
    ],
)
def test_context_length_exceeded_is_context_overflow(exc: BaseException) -> None:
    result = classify_model_error(exc)
    assert result["kind"] == "context_overflow"
    assert result["message"].startswith("the conversation is too long for the model: ")
    assert result["retry_after"] is None


@pytest.mark.parametrize(
    ("exc", "detail"),
    [
        (
            json.JSONDecodeError("Expecting value", "", 0),
            "the reply was not JSON (Expecting value: line 1 column 1 (char 0))",
        ),
        # what the endpoint sent, not the parser's words (issue 34)
        (
            IndexError("list index out of range"),
            "the reply held no completion (its `choices` were empty)",
        ),
    ],
)
def test_garbled_responses_are_transient(exc: BaseException, detail: str) -> None:
    assert classify_model_error(exc) == error(
        "model_transient", f"invalid response from endpoint: {detail}"
    )


def test_unknown_failure_is_fatal_and_not_retried() -> None:
    assert classify_model_error(ValueError("weird")) == error(
        "model_fatal", "the model call failed: weird"
    )


def test_long_detail_is_shortened() -> None:
    result = classify_model_error(TimeoutError("x" * 1000))
    assert result["message"] == "the model endpoint did not answer in time: " + "x" * 600 + "…"


def test_a_masked_key_is_shortened_rather_than_the_advice_after_it_cut_off() -> None:
    error = RuntimeError(f"Incorrect API key provided: sk-{'*' * 400}5NQA. Find your key at URL.")
    result = classify_model_error(error)
    assert result["message"].endswith("sk-****5NQA. Find your key at URL.")
