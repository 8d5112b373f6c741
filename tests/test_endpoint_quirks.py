"""Real OpenAI-compatible servers as they behave, with the real langchain-openai client: tools that
reach the model (the scripted server reproduces each server's quirks, tests/openai_server.py
QUIRKS), Waypoint's notices kept out of the model's context, budgets that hold, an output limit."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from app.models import make_chat_model
from app.models.openai_compat import RepetitionDetector, repeated_unit
from app.service.context import SYSTEM_PROMPT
from app.service.memory import EXPERIENCE_HEADER, honest_status
from app.store import open_checkpointer
from graphs.plan.state import Plan
from graphs.shared.model_call import ask_structured
from graphs.state import AgentContext
from graphs.strategies import get_strategy, strategy_turn_input
from tests.conftest import run_cli
from tests.openai_server import (
    INVENTED_ANSWER,
    LLAMA_CPP_PYTHON,
    OpenAIServer,
    error,
    hang,
    text,
    tool_call,
    tool_calls,
)
from tools import default_tools

TIMEOUT = 2.0
CALCULATION = tool_calls(tool_call("calculator", {"expression": "2+3*4"}, "call_a"))
PLAN = {"steps": [{"tool": "calculator", "arguments": {"expression": "2+3*4"}, "reason": "math"}]}


@pytest.fixture(autouse=True)
def api_key(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[BaseCheckpointSaver]:
    with open_checkpointer(tmp_path / "db" / "agent.sqlite") as saver:
        yield saver


@pytest.fixture
def llama_cpp_python() -> Iterator[OpenAIServer]:
    with OpenAIServer(quirks=LLAMA_CPP_PYTHON) as server:
        yield server
        assert not server.exhausted


@pytest.fixture
def plain_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server
        assert not server.exhausted


def turn(
    server: OpenAIServer,
    saver: BaseCheckpointSaver,
    tmp_path: Path,
    message: str,
    strategy: str = "react",
    number: int = 1,
    **limits: Any,
) -> dict:
    """Turn `number` of a thread of `strategy`, with the model exactly as `--model openai:m`
    builds it."""
    model = make_chat_model("openai:m", timeout=TIMEOUT, base_url=server.base_url)
    context = AgentContext(
        model=model,
        tools=default_tools(tmp_path / "ws"),
        system_prompt=SYSTEM_PROMPT,
        **({"max_retries": 2, "backoff_base": 0, "sleep": lambda seconds: None} | limits),
    )
    chosen = get_strategy(strategy)
    graph = chosen.build(saver)
    config = {"configurable": {"thread_id": f"quirks-{strategy}"}, "recursion_limit": 60}
    human = HumanMessage(message, id=f"human-{strategy}-{number}")
    graph.invoke(strategy_turn_input(chosen, human, number), config, context=context)
    return graph.get_state(config).values


def tool_results(values: dict) -> list[tuple[str, str]]:
    return [(m.name, m.content) for m in values["messages"] if isinstance(m, ToolMessage)]


def test_tools_go_with_an_explicit_tool_choice_and_no_null_content(
    plain_server: OpenAIServer, saver: BaseCheckpointSaver, tmp_path: Path
) -> None:
    plain_server.add(CALCULATION, text("It is 14."))

    values = turn(plain_server, saver, tmp_path, "what is 2+3*4?")

    assert (values["status"], values["messages"][-1].content) == ("answered", "It is 14.")
    first, second = plain_server.completions
    assert (first.body["tool_choice"], second.body["tool_choice"]) == ("auto", "auto")
    assistant = second.messages[-2]
    assert assistant["role"] == "assistant" and assistant["tool_calls"]
    assert assistant["content"] == ""  # never null: several servers refuse it
    plain_server.assert_done()


def test_a_llama_cpp_python_server_gets_tool_calls_through(
    llama_cpp_python: OpenAIServer, saver: BaseCheckpointSaver, tmp_path: Path
) -> None:
    llama_cpp_python.add(CALCULATION, text("It is 14."))

    values = turn(llama_cpp_python, saver, tmp_path, "what is 2+3*4?")

    assert (values["status"], values["messages"][-1].content) == ("answered", "It is 14.")
    assert tool_results(values) == [("calculator", "14")]
    requests = llama_cpp_python.completions
    # The first streamed step came back empty and was asked once more without streaming; the
    # next step went unstreamed at once (before: streamed and empty again, a wasted prompt).
    assert [(r.stream, r.outcome) for r in requests] == [
        (True, "empty_stream"),
        (False, "message"),
        (False, "message"),
    ]
    assert all(r.body["tool_choice"] == "auto" for r in requests)
    assert INVENTED_ANSWER not in str(values["messages"])
    llama_cpp_python.assert_done()


def test_repeated_names_in_streamed_calls_are_repaired(
    llama_cpp_python: OpenAIServer,
) -> None:
    llama_cpp_python.add(tool_calls(tool_call("Plan", PLAN, "call_plan"), chunks=4))
    model = make_chat_model("openai:m", timeout=TIMEOUT, base_url=llama_cpp_python.base_url)

    reply = ask_structured(model, Plan, [HumanMessage("what is 2+3*4?")])

    assert reply.error is None
    assert reply.parsed == Plan.model_validate(PLAN)
    assert reply.raw is not None and reply.raw.tool_calls[0]["name"] == "Plan"
    [request] = llama_cpp_python.completions
    assert request.stream and request.body["tool_choice"]["function"]["name"] == "Plan"


def test_the_plan_strategy_works_on_a_llama_cpp_python_server(
    llama_cpp_python: OpenAIServer, saver: BaseCheckpointSaver, tmp_path: Path
) -> None:
    llama_cpp_python.add(
        tool_calls(tool_call("Plan", PLAN, "call_plan"), chunks=4), text("2+3*4 is 14.")
    )

    values = turn(llama_cpp_python, saver, tmp_path, "what is 2+3*4?", strategy="plan")

    assert (values["status"], values["messages"][-1].content) == ("answered", "2+3*4 is 14.")
    assert [(s["tool"], s["status"], s["result"]) for s in values["step_results"]] == [
        ("calculator", "success", "14")
    ]
    llama_cpp_python.assert_done()


def test_an_empty_streamed_answer_is_asked_once_more_without_streaming(
    plain_server: OpenAIServer, saver: BaseCheckpointSaver, tmp_path: Path
) -> None:
    plain_server.add(text(""), text("Here it is."))

    values = turn(plain_server, saver, tmp_path, "hello")

    assert (values["status"], values["messages"][-1].content) == ("answered", "Here it is.")
    assert [r.stream for r in plain_server.completions] == [True, False]
    assert values["retry_count"] == 0


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            400,
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        ),
        (500, "tools param requires --jinja flag"),
        (400, "registry.ollama.ai/library/gemma:2b does not support tools"),
    ],
    ids=["vllm", "llama-server", "ollama"],
)
def test_a_server_that_refuses_tools_is_not_retried_and_react_is_suggested(
    status: int,
    message: str,
    plain_server: OpenAIServer,
    saver: BaseCheckpointSaver,
    tmp_path: Path,
) -> None:
    plain_server.add(error(status, message, type="BadRequestError"))

    values = turn(plain_server, saver, tmp_path, "what is 2+3*4?")

    assert values["status"] == "failed"
    assert len(plain_server.completions) == 1
    answer = values["messages"][-1].content
    assert answer.startswith(
        f"The model call failed on the first attempt (retry budget 2): HTTP {status}"
    )
    assert "use --tool-protocol react" in answer and message in answer


# --- Waypoint's notices are not the model's words ---------------------------------------------------


def test_a_failure_panel_is_stored_but_never_sent_as_the_assistants_words(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", plain_server.base_url)
    monkeypatch.setenv("APP_MAX_RETRIES", "1")
    plain_server.add(*[error(500, "The server had an error", type="server_error")] * 2)

    failed = run_cli("chat", "-t", "t", "--model", "openai:m", "-m", "what is 17 * 23?")

    assert failed.returncode == 1
    assert "The model call kept failing after 2 attempts" in failed.stderr.decode()
    plain_server.add(text("391."))
    again = run_cli("chat", "-t", "t", "--model", "openai:m", "-m", "what is 17 * 23?")

    assert (again.returncode, again.stdout.decode()) == (0, "391.\n")
    sent = plain_server.completions[-1].messages
    assert [m["role"] for m in sent] == ["system", "user", "user"]
    assert "kept failing" not in json.dumps(sent) and "endpoint is up" not in json.dumps(sent)
    transcript = run_cli("export", "-t", "t", "--format", "md").stdout.decode()
    assert "The model call kept failing" in transcript  # the user and the history still see it


def test_a_budget_notice_is_not_sent_as_the_assistants_words(
    plain_server: OpenAIServer, saver: BaseCheckpointSaver, tmp_path: Path
) -> None:
    # One step allowed: after the tool runs, finalize asks for a last answer, which fails, so
    # Waypoint writes "I stopped because of the step budget…" itself.
    plain_server.add(CALCULATION, error(400, "no more", type="invalid_request_error"))
    first = turn(plain_server, saver, tmp_path, "what is 2+3*4?", max_iterations=1)
    assert first["status"] == "max_iterations"
    assert first["messages"][-1].content.startswith("I stopped because of the step budget")
    plain_server.add(text("Hello again."))

    turn(plain_server, saver, tmp_path, "hello", number=2, max_iterations=1)

    sent = plain_server.completions[-1].messages
    assert "I stopped because" not in json.dumps(sent)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]


# --- budgets that hold while the endpoint stalls ---------------------------------------------------

HANG_SECONDS = 60.0


@pytest.mark.parametrize("strategy", ["react", "plan"])
def test_max_seconds_holds_while_the_endpoint_hangs(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, strategy: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", plain_server.base_url)
    plain_server.add(hang(HANG_SECONDS))
    started = time.monotonic()

    result = run_cli(
        *("chat", "-t", "t", "--model", "openai:m", "--strategy", strategy),
        *("--max-seconds", "2", "--jsonl", "-m", "hello"),
    )

    elapsed = time.monotonic() - started
    assert elapsed < HANG_SECONDS / 4  # the default model timeout (60 s) never ran its course
    assert result.returncode == 1, result.stderr.decode()  # stopped, not answered
    final = json.loads(result.stdout.decode().splitlines()[-1])
    assert final["status"] == "budget_exhausted"
    assert final["answer"].startswith("I stopped because of the time budget (2 s per turn)")
    assert len(plain_server.completions) == 1  # no last answer asked of an endpoint that hangs


def test_a_retry_wait_never_outlasts_the_time_budget(
    plain_server: OpenAIServer, saver: BaseCheckpointSaver, tmp_path: Path
) -> None:
    plain_server.add(error(429, "slow down", type="requests", headers={"Retry-After": "30"}))
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    started = time.monotonic()
    values = turn(plain_server, saver, tmp_path, "hello", max_seconds=1.5, sleep=sleep)

    assert time.monotonic() - started < 15  # not the 30 s the endpoint asked for
    assert values["status"] == "budget_exhausted" and values["budget_exhausted"] == "time"
    assert len(waits) == 1 and waits[0] <= 1.5
    assert len(plain_server.completions) == 1  # the attempt after the wait had no time left


# --- an output limit ---------------------------------------------------------------------------------


def test_each_reply_is_capped_by_max_tokens(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", plain_server.base_url)
    plain_server.add(text("Hello."), text("Hello again."))

    run_cli("chat", "-t", "t", "--model", "openai:m", "-m", "hello")
    monkeypatch.setenv("APP_MAX_OUTPUT_TOKENS", "256")
    run_cli("chat", "-t", "t", "--model", "openai:m", "-m", "hello")

    default, configured = plain_server.completions
    # Compatible servers read max_tokens (llama-cpp-python ignores max_completion_tokens).
    assert (default.body["max_tokens"], configured.body["max_tokens"]) == (4096, 256)
    assert "max_completion_tokens" not in default.body


def test_a_reply_that_repeats_itself_is_stopped(
    plain_server: OpenAIServer, saver: BaseCheckpointSaver, tmp_path: Path
) -> None:
    looping = "The weather is nice today. " * 2000
    plain_server.add(text(looping, chunks=2000))

    values = turn(plain_server, saver, tmp_path, "tell me about the weather")

    assert values["status"] == "failed"
    answer = values["messages"][-1].content
    assert "the model's reply kept repeating itself (" in answer
    unit = answer.split("itself (")[1].split(" over and over")[0].strip("'")
    assert unit in looping[: 2 * len(unit)] and len(unit) % len("The weather is nice today. ") == 0
    stopped_after = int(answer.split("stopped after ")[1].split(" characters")[0].replace(",", ""))
    assert stopped_after < len(looping) // 20
    assert len(plain_server.completions) == 1  # not retried: it would loop again


# --- experience memory: honest outcomes, per-turn material last ---------------------------------------


def chat(thread: str, message: str, *flags: str) -> str:
    result = run_cli("chat", "-t", thread, "--model", "openai:m", *flags, "-m", message)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def test_an_answer_without_a_tool_result_is_not_remembered_as_a_success(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", plain_server.base_url)
    plain_server.add(text("17 * 23 = 340."), text("391."))

    chat("first", "what is 17 * 23?")
    chat("second", "what is 17 * 23 really?")

    # the unchecked answer ("340") is not passed on, nor that there was one: no notes at all
    sent = plain_server.completions[-1].messages
    assert sent == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "what is 17 * 23 really?"},
    ]


def test_past_experience_goes_after_the_fixed_prefix_of_the_prompt(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", plain_server.base_url)
    plain_server.add(
        text('Thought: look it up\nAction: get_weather\nAction Input: {"city": "Paris"}'),
        text("Thought: done\nFinal Answer: Paris is mild today."),
        text("Thought: no tool needed\nFinal Answer: Still mild."),
    )

    chat("first", "what is the weather in Paris?", "--tool-protocol", "react")
    chat("second", "and the weather in Paris now?", "--tool-protocol", "react")

    first, _, later = plain_server.completions
    # The system prompt with the tool schemas is byte for byte the same, so a server's prompt
    # cache can reuse it; the experience block comes with the user's message, last.
    assert later.messages[0] == first.messages[0]
    assert EXPERIENCE_HEADER not in later.messages[0]["content"]
    assert "get_weather" in later.messages[0]["content"]
    *_, notes, asked = later.messages
    assert notes["role"] == "system" and notes["content"].startswith(EXPERIENCE_HEADER)
    assert (
        '"what is the weather in Paris?" → get_weather: "Paris is mild today."' in notes["content"]
    )
    assert asked == {"role": "user", "content": "and the weather in Paris now?"}


@pytest.mark.parametrize(
    ("status", "tools", "judged_wrong", "honest"),
    [
        ("answered", ["calculator"], False, "answered"),
        ("answered", [], False, "unverified"),
        ("answered", ["calculator"], True, "judged_wrong"),
        ("max_iterations", [], False, "max_iterations"),
    ],
)
def test_honest_status(status: str, tools: list[str], judged_wrong: bool, honest: str) -> None:
    assert honest_status(status, tools, judged_wrong) == honest


# --- doctor --ping: a tool-call round trip with the model in use -------------------------------------


def doctor(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, *flags: str) -> tuple[int, str]:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY")  # a local server: only the base URL is set
    result = run_cli("doctor", "--ping", *flags)
    return result.returncode, result.stdout.decode()


def test_doctor_checks_the_tool_round_trip_of_the_model_named(
    llama_cpp_python: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    llama_cpp_python.add(
        text("pong"), tool_calls(tool_call("calculator", {"expression": "6*7"})), text("42.")
    )

    code, out = doctor(llama_cpp_python, monkeypatch, "--model", "openai:smollm2")

    assert code == 0, out
    assert "ok  ping: answered in" in out
    assert (
        "ok  tools: native tool calls work: calculator({'expression': '6*7'}) → '42', then '42.'"
        in out
    )
    assert {r.body["model"] for r in llama_cpp_python.completions} == {"smollm2"}
    llama_cpp_python.assert_done()


def test_doctor_says_plainly_when_the_endpoint_ignores_tools(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain_server.add(text("pong"), text("6 times 7 is 42."))

    code, out = doctor(plain_server, monkeypatch, "--model", "openai:m")

    assert code == 1
    assert "FAIL  tools: the endpoint answered in text instead of calling the offered tool" in out
    assert "Use --tool-protocol react" in out
    probe = plain_server.completions[1]
    assert [t["function"]["name"] for t in probe.body["tools"]] == ["calculator"]


def test_doctor_reports_a_server_that_refuses_tools(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )
    plain_server.add(text("pong"), error(400, refusal, type="BadRequestError"))

    code, out = doctor(plain_server, monkeypatch, "--model", "openai:m")

    assert code == 1
    assert "FAIL  tools: model_fatal: HTTP 400: the endpoint does not accept tool calls; use" in out


def test_doctor_checks_the_react_protocol_when_asked(
    plain_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain_server.add(
        text("pong"),
        text('Thought: use it\nAction: calculator\nAction Input: {"expression": "6*7"}'),
        text("Thought: done\nFinal Answer: 42"),
    )

    code, out = doctor(plain_server, monkeypatch, "--model", "openai:m", "--tool-protocol", "react")

    assert code == 0, out
    assert "ok  tools: react tool calls work: calculator({'expression': '6*7'}) → '42'" in out
    assert all("tools" not in r.body for r in plain_server.completions)


# --- the repetition detector ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "looping",
    [
        "I am a helpful assistant. " * 40,
        "ha" * 300,
        "Step: add the numbers.\nResult: unknown.\n" * 20,
        "x" * 500,
    ],
)
def test_a_reply_that_loops_is_recognised(looping: str) -> None:
    detector = RepetitionDetector()
    found = [
        unit for piece in _pieces("Let me think. " + looping) if (unit := detector.feed(piece))
    ]
    assert found and found[0] in looping


@pytest.mark.parametrize(
    "ordinary",
    [
        "| city | high |\n|---|---|\n| Paris | 21 |\n| Rome | 27 |\n| Oslo | 15 |\n" * 2,
        " ".join(f"line {n}: the value is {n * n}." for n in range(200)),
        "=" * 80 + "\nTitle\n" + "=" * 80 + "\n" + "Some prose about many things. " * 3,
    ],
)
def test_ordinary_replies_are_not_cut(ordinary: str) -> None:
    detector = RepetitionDetector()
    assert not [piece for piece in _pieces(ordinary) if detector.feed(piece)]
    assert repeated_unit(ordinary) is None


def _pieces(text_: str, size: int = 7) -> list[str]:
    return [text_[i : i + size] for i in range(0, len(text_), size)]
