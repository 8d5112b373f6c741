"""Turns that say honestly how they went: an answer no evaluator could judge, an empty plan, a piped
message whose trailing newline stays out of the thread's title, and one rule for success (only an
answered turn is one) on the CLI's exit status, the API and `history`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from app.cli.render import STRATEGY_EVENTS
from graphs.plan.nodes import EMPTY_PLAN
from graphs.plan.state import Plan, PlanStep
from graphs.state import AgentContext
from graphs.strategies import get_strategy, strategy_turn_input
from tests.conftest import run_cli
from tests.fakes import ScriptedChatModel
from tests.openai_server import OpenAIServer, hang
from tools import default_tools


def run(strategy: str, model: ScriptedChatModel, tmp_path: Path, **limits: Any) -> tuple:
    chosen = get_strategy(strategy)
    graph = chosen.build(InMemorySaver())
    context = AgentContext(
        model=model, tools=default_tools(tmp_path), backoff_base=0, sleep=lambda s: None, **limits
    )
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 60}
    message = HumanMessage("what is the weather in Oslo?", id="h1")
    events = list(
        graph.stream(
            strategy_turn_input(chosen, message, 1),
            config,
            context=context,
            stream_mode="custom",
            subgraphs=True,
        )
    )
    return graph.get_state(config).values, [payload for _, payload in events]


def test_an_answer_without_a_usable_verdict_is_not_a_success(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=["It is sunny in Oslo.", AIMessage("Looks fine to me.")])

    values, events = run("reflexion", model, tmp_path, max_trials=1)

    assert values["verdict"]["success"] is False
    assert values["verdict"]["reason"].startswith("no usable verdict (the reply contained no")
    [verdict] = [e for e in events if e["type"] == "verdict"]
    line = STRATEGY_EVENTS["verdict"](verdict)
    assert line.startswith("✗ evaluation of attempt 1: failure — no usable verdict")
    model.assert_done()


def test_an_empty_plan_is_questioned_once_then_accepted_and_shown(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[Plan(steps=[]), Plan(steps=[]), "Hello!"])

    values, events = run("plan", model, tmp_path)

    assert (values["status"], values["messages"][-1].content) == ("answered", "Hello!")
    second_planner_call = model.calls[1]
    assert EMPTY_PLAN in str(second_planner_call[-1].content)
    [plan] = [e for e in events if e["type"] == "plan"]
    assert STRATEGY_EVENTS["plan"](plan) == "plan: no steps (answering without tools)"
    model.assert_done()


def test_a_model_asked_about_its_empty_plan_can_send_the_steps(tmp_path: Path) -> None:
    step = PlanStep(tool="get_weather", arguments={"city": "Paris"}, reason="look it up")
    model = ScriptedChatModel(script=[Plan(steps=[]), Plan(steps=[step]), "Paris: see above."])

    values, _ = run("plan", model, tmp_path)

    assert values["status"] == "answered"
    assert [(r["tool"], r["status"]) for r in values["step_results"]] == [
        ("get_weather", "success")
    ]
    model.assert_done()


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"  \n\n"])
def test_a_piped_message_keeps_its_trailing_newline_out_of_the_title(ending: bytes) -> None:
    result = run_cli("chat", "-t", "piped", input=b"what is 6 times 7" + ending)
    assert result.returncode == 0, result.stderr.decode()

    listing = run_cli("threads", "list", "--json")

    [thread] = json.loads(listing.stdout.decode())
    assert thread["title"] == "what is 6 times 7"


def outcomes(message: str, limits: dict[str, Any]) -> tuple[int, str, str, list[tuple]]:
    """The same turn through the CLI (exit status, stderr) and the HTTP API (the run's values and
    the thread's state), and `history --json` of both threads: (exit, API status, stderr, rows)."""
    from fastapi.testclient import TestClient

    from app.config import load_settings
    from app.server.api import create_app

    flags = [f"--{name.replace('_', '-')}={value}" for name, value in limits.items()]
    cli = run_cli("chat", "-t", "cli", *flags, "-m", message)
    client = TestClient(create_app(load_settings()), base_url="http://localhost")
    client.post("/threads", json={"thread_id": "api"}).raise_for_status()
    body = {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": message}]},
        "context": limits,
    }
    values = client.post("/threads/api/runs/wait", json=body).json()
    assert client.get("/threads/api/state").json()["values"]["status"] == values["status"]
    rows = []
    for thread in ("cli", "api"):
        [row] = json.loads(run_cli("history", "-t", thread, "--json").stdout)
        rows.append((row["status"], row["success"]))
    return cli.returncode, values["status"], cli.stderr.decode(), rows


@pytest.mark.parametrize(
    ("message", "limits", "outcome", "exit_code"),
    [
        ("what is 6 times 7", {}, "answered", 0),
        ("search for release checklist", {}, "failed", 1),  # the corpus is empty: a polite failure
        ("read missing.txt", {}, "failed", 1),
        # The calculator ran, then the step limit stopped the turn: stopped is not answered.
        ("what is 6 times 7", {"max_iterations": 1}, "max_iterations", 1),
    ],
)
def test_the_api_history_and_exit_code_tell_one_outcome(
    message: str, limits: dict[str, Any], outcome: str, exit_code: int
) -> None:
    code, status, stderr, rows = outcomes(message, limits)

    assert code == exit_code, stderr
    assert status == outcome
    assert rows == [(outcome, exit_code == 0)] * 2


def test_a_time_budget_spent_with_nothing_done_is_not_a_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with OpenAIServer() as stalled:
        stalled.add(hang(60.0), hang(60.0))  # the CLI's turn, then the API's
        monkeypatch.setenv("OPENAI_BASE_URL", stalled.base_url)
        monkeypatch.setenv("APP_MODEL", "openai:m")

        code, status, stderr, rows = outcomes("hello", {"max_seconds": 1})

        assert code == 1, stderr
        assert "turn 1 of thread cli stopped before answering: the time or token budget" in stderr
        assert status == "budget_exhausted"
        assert rows == [("budget_exhausted", False)] * 2
        stalled.discard_unused()  # a loaded machine may spend the second before the request


def test_a_plan_that_could_not_be_used_is_not_called_a_tool_failure(tmp_path: Path) -> None:
    unknown = PlanStep(tool="teleport", arguments={"to": "Oslo"}, reason="go and look")
    model = ScriptedChatModel(script=[Plan(steps=[unknown])] * 3)  # the retry budget: 2

    values, _ = run("plan", model, tmp_path, max_retries=2)

    notice = values["messages"][-1].content
    assert values["status"] == "failed"
    assert notice.startswith("The model's plan could not be used after 3 attempts (retry budget 2)")
    assert "teleport" in notice and "--strategy react" in notice
    assert "tool calls kept failing" not in notice
    model.assert_done()
