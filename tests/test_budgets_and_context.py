"""Turn budgets (time, tokens), the Retry-After cap, context summarisation, /compact and doctor."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import openai
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from app.cli.render import JsonlRenderer
from app.config import load_settings
from app.models.offline import OfflineChatModel
from app.service.context import make_context
from app.service.session import ChatSession
from app.store import open_checkpointer
from graphs.react.graph import build_graph
from graphs.shared.model_errors import EMPTY_STREAM
from graphs.shared.summarize import SUMMARY_NAME, split_for_summary
from graphs.state import AgentContext, turn_input
from tests.conftest import run_cli
from tests.fakes import ScriptedChatModel, ai_calls, call
from tools import default_tools


def run(context: AgentContext, *texts: str, graph=None) -> dict:  # type: ignore[no-untyped-def]
    graph = graph or build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    for number, text in enumerate(texts, start=1):
        graph.invoke(
            turn_input(HumanMessage(text, id=f"h{number}"), number, started_at=0.0),
            config,
            context=context,
        )
    return graph.get_state(config).values


def calculator_call(n: int) -> AIMessage:
    return ai_calls(call("calculator", {"expression": f"{n}+1"}, f"c{n}"))


class TenSecondsPerCall(ScriptedChatModel):
    """Every model call takes 10 s of the test's clock."""

    now: float = 0.0

    def _generate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.now += 10
        return super()._generate(*args, **kwargs)


def test_time_budget_ends_the_turn_in_finalize(tmp_path: Path):
    model = TenSecondsPerCall(script=[calculator_call(1), calculator_call(2), "partial answer"])
    context = AgentContext(
        model=model,
        tools=default_tools(tmp_path),
        max_seconds=15,
        clock=lambda: model.now,
        sleep=lambda s: None,
    )
    values = run(context, "count")
    assert values["status"] == "budget_exhausted"
    assert values["budget_exhausted"] == "time"
    assert values["messages"][-1].content == "partial answer"
    assert "You cannot call tools any more" in model.calls[-1][-1].content
    model.assert_done()


def test_token_budget_ends_the_turn_in_finalize(tmp_path: Path):
    def with_usage(message: AIMessage, tokens: int) -> AIMessage:
        message.usage_metadata = {
            "input_tokens": tokens - 10,
            "output_tokens": 10,
            "total_tokens": tokens,
        }
        return message

    model = ScriptedChatModel(
        script=[with_usage(calculator_call(1), 600), with_usage(calculator_call(2), 600), "done"]
    )
    context = AgentContext(
        model=model, tools=default_tools(tmp_path), max_tokens_per_turn=1000, sleep=lambda s: None
    )
    values = run(context, "count")
    assert values["status"] == "budget_exhausted" and values["budget_exhausted"] == "tokens"
    assert values["tokens_used"] == 1200
    tool_results = [m for m in values["messages"] if m.type == "tool"]
    assert [m.status for m in tool_results] == ["success", "error"]  # the 2nd call was not run
    assert "not run" in tool_results[1].content


def rate_limited(seconds: int) -> openai.RateLimitError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(429, headers={"retry-after": str(seconds)}, request=request)
    return openai.RateLimitError("slow down", response=response, body=None)


def test_a_retry_after_beyond_the_cap_fails_fast_and_says_when():
    waits: list[float] = []
    model = ScriptedChatModel(script=[rate_limited(3600)])
    context = AgentContext(model=model, max_retry_after=60, sleep=waits.append)
    values = run(context, "hello")
    assert values["status"] == "failed"
    assert "rate limited; retry after 3600 s" in values["messages"][-1].content
    assert waits == []


def test_a_retry_after_within_the_cap_is_waited_out():
    waits: list[float] = []
    model = ScriptedChatModel(script=[rate_limited(2), "hi"])
    values = run(AgentContext(model=model, max_retry_after=60, sleep=waits.append), "hello")
    assert values["status"] == "answered" and waits and waits[0] >= 2


def test_split_for_summary_keeps_whole_turns():
    messages = [
        HumanMessage("a", id="1"),
        calculator_call(1),
        AIMessage("x", id="2"),
        HumanMessage("b", id="3"),
        AIMessage("y", id="4"),
        HumanMessage("c", id="5"),
    ]
    older, recent = split_for_summary(messages, keep_recent_turns=1)
    assert [m.id for m in recent] == ["3", "4", "5"]
    assert older == messages[:3]
    assert split_for_summary(messages[:2], keep_recent_turns=1) == ([], messages[:2])


def test_over_budget_input_is_summarised_first_and_facts_survive(tmp_path: Path):
    context = AgentContext(
        model=OfflineChatModel(),
        tools=default_tools(tmp_path),
        context_tokens=200,
        sleep=lambda s: None,
    )
    graph = build_graph(InMemorySaver())
    values = run(
        context,
        "my name is Ada",
        "what is 1 plus 1",
        "weather in Paris and Tokyo",
        "what's my name?",
        graph=graph,
    )
    assert values["messages"][-1].content == "Your name is Ada."
    summary = values["messages"][0]
    assert isinstance(summary, SystemMessage) and summary.name == SUMMARY_NAME
    assert "user: my name is Ada" in summary.content
    history = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))
    assert any(len(s.values.get("messages", [])) >= 11 for s in history)  # old checkpoints intact


def context_overflow() -> openai.BadRequestError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    body = {"error": {"message": "too long", "code": "context_length_exceeded"}}
    response = httpx.Response(400, json=body, request=request)
    return openai.BadRequestError("too long", response=response, body=body["error"])


def test_context_overflow_summarises_then_retries_once(tmp_path: Path):
    model = ScriptedChatModel(
        script=["first answer", context_overflow(), "summary of turn 1", "second answer"]
    )
    context = AgentContext(
        model=model, tools=default_tools(tmp_path), context_tokens=None, sleep=lambda s: None
    )
    values = run(context, "first question", "second question")
    assert values["status"] == "answered" and values["messages"][-1].content == "second answer"
    assert values["messages"][0].name == SUMMARY_NAME
    assert "summary of turn 1" in values["messages"][0].content
    retried_with = model.calls[-1]
    assert [m.content for m in retried_with if m.type == "human"] == ["second question"]


def test_an_empty_stream_is_judged_by_the_size_of_the_prompt_it_followed(tmp_path: Path):
    """The agent counts its prompt when the call fails: after a long conversation an empty stream
    is an overflow (summarised, then asked again); after a short one, a glitch (asked again)."""
    empty = ValueError(EMPTY_STREAM)
    long_question = "tell me about " + "the weather in Paris " * 600  # ~3,000 tokens
    summaries = ["summary of its first half", "summary of turn 1"]  # folded in two chunks
    model = ScriptedChatModel(script=["first answer", empty, *summaries, "second answer"])
    context = AgentContext(
        model=model, tools=default_tools(tmp_path), context_tokens=None, sleep=lambda s: None
    )
    values = run(context, long_question, "second question")
    assert values["messages"][0].name == SUMMARY_NAME
    assert "summary of turn 1" in values["messages"][0].content
    assert values["messages"][-1].content == "second answer"
    model.assert_done()

    model = ScriptedChatModel(script=[empty, "an answer"])
    values = run(AgentContext(model=model, sleep=lambda s: None), "a short question")
    assert values["messages"][-1].content == "an answer"
    assert not any(m.name == SUMMARY_NAME for m in values["messages"])
    assert len(model.calls) == 2


def test_context_overflow_with_nothing_to_summarise_fails_clearly(tmp_path: Path):
    model = ScriptedChatModel(script=[context_overflow()])
    values = run(AgentContext(model=model, sleep=lambda s: None), "one huge question")
    assert values["status"] == "failed"
    assert "no longer fits the model's context" in values["messages"][-1].content


def test_compact_replaces_older_turns_with_a_summary():
    settings = load_settings()
    quiet = JsonlRenderer(Console(file=io.StringIO()))
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, "c", make_context(settings))
        for text in ("my name is Ada", "what is 1 plus 1", "what is 2 plus 2"):
            session.run_turn(text, quiet)
        assert session.compact(quiet) == 6
        session.run_turn("what's my name?", quiet)
        values = session.graph.get_state(session.config).values
    assert values["messages"][0].name == SUMMARY_NAME
    assert values["messages"][-1].content == "Your name is Ada."


def test_chat_flags_set_the_budgets():
    result = run_cli(
        "chat",
        "-t",
        "b",
        "--max-seconds",
        "0.1",
        "--jsonl",
        "-m",
        "weather in Paris and Tokyo, which is warmer?",
    )
    final = json.loads(result.stdout.decode().splitlines()[-1])
    assert final["status"] in {"budget_exhausted", "answered"}  # a fast machine may finish in time
    assert result.returncode == (0 if final["status"] == "answered" else 1), result.stderr.decode()
    bad = run_cli("chat", "-t", "b", "--max-seconds", "0", "-m", "hi")
    assert bad.returncode == 2


def test_doctor_reports_configuration_masks_secrets_and_pings(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value-1234")
    monkeypatch.setenv("APP_MODEL", "offline")
    result = run_cli("doctor", "--ping")
    text = result.stdout.decode()
    assert result.returncode == 0, text
    assert "sk-…1234" in text and "sk-secret-value-1234" not in text
    assert "ok  ping: answered" in text and "ok  workspace" in text


def test_doctor_fails_on_a_damaged_database(isolated: Path):
    bogus = isolated / "bogus.sqlite"
    bogus.write_text("not a database")
    result = run_cli("doctor", "--db", str(bogus))
    assert result.returncode == 1
    assert "FAIL  database" in result.stdout.decode()


def test_a_passed_model_deadline_is_a_spent_time_budget():
    """The run's model deadline starts with the run, a little before its first node stamps the
    turn's start: a model call it cut off ends the turn (finalize), it is not retried into a
    failure while the stamped clock still says there is time."""
    from graphs.shared.deadline import model_deadline
    from graphs.shared.limits import exhausted_budget

    context = AgentContext(model=OfflineChatModel(), max_seconds=2, clock=lambda: 1001.9)
    state = {"turn_started_at": 1000.0}
    assert exhausted_budget(state, context, 0) is None
    with model_deadline(-0.001):
        assert exhausted_budget(state, context, 0) == "time"
    unlimited = AgentContext(model=OfflineChatModel(), clock=lambda: 1001.9)
    with model_deadline(-0.001):
        assert exhausted_budget(state, unlimited, 0) is None
