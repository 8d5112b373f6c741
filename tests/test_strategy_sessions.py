"""Strategies through ChatSession and the CLI: remembered per thread, lessons in long-term memory,
history and rollback inside each strategy's thread, `graph --strategy`, `chat --strategy`."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from app.cli.render import ConsoleRenderer, JsonlRenderer
from app.config import load_settings
from app.service.context import make_context
from app.service.memory import open_memory
from app.service.session import ChatSession
from app.store import open_checkpointer
from graphs.catalog import DEFAULT_STRATEGY, STRATEGY_NAMES
from graphs.reflexion.state import Lesson, Verdict
from graphs.strategies import STRATEGIES
from tests.conftest import run_cli
from tests.fakes import ScriptedChatModel


def quiet() -> JsonlRenderer:
    return JsonlRenderer(Console(file=io.StringIO()))


def seed(thread: str, strategy: str | None, *messages: str) -> list[str]:
    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, thread, make_context(settings), strategy=strategy)
        return [session.run_turn(text, quiet()).answer for text in messages]


def show(thread: str, *args: str) -> dict:
    result = run_cli("show", "-t", thread, "--json", *args)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def checkpoints(thread: str) -> list[dict]:
    result = run_cli("history", "-t", thread, "--all", "--json")
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def test_a_thread_keeps_its_strategy_and_an_override_is_announced():
    seed("s", "plan", "what is 1 plus 1")
    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        assert ChatSession(settings, saver, "s", make_context(settings)).strategy.name == "plan"
        session = ChatSession(settings, saver, "s", make_context(settings), strategy="react")
        out, err = io.StringIO(), io.StringIO()
        renderer = ConsoleRenderer(Console(file=out), Console(file=err))
        assert session.run_turn("what is 2 plus 2", renderer).answer == "2 + 2 = 4"
    assert "thread s ran with --strategy plan; this turn uses react" in err.getvalue()
    with open_checkpointer(settings.db) as saver:
        assert ChatSession(settings, saver, "s", make_context(settings)).strategy.name == "react"


@pytest.mark.parametrize("strategy", [n for n in STRATEGY_NAMES if n != DEFAULT_STRATEGY])
def test_history_and_rollback_inside_a_strategy_thread(strategy: str):
    answers = seed("t", strategy, "what is 1 plus 1", "what is 2 plus 2")
    assert answers == ["1 + 1 = 2", "2 + 2 = 4"]

    history = json.loads(run_cli("history", "-t", "t", "--json").stdout)
    assert [(h["turn"], h["status"], h["tools"]) for h in history] == [
        (2, "answered", ["calculator"]),
        (1, "answered", ["calculator"]),
    ]
    nodes = {c["node"] for c in checkpoints("t")}
    expected = {
        "plan": {"planner", "executor", "synthesizer"},
        "reflexion": {"attempt", "evaluate"},
    }
    assert expected.get(strategy, {"classify", "calculator"}) <= nodes

    result = run_cli("rollback", "-t", "t", "--turns", "1")
    assert result.returncode == 0, result.stderr.decode()
    assert [m["content"] for m in show("t")["messages"]][-1] == "1 + 1 = 2"
    assert seed("t", None, "what is 3 plus 3") == ["3 + 3 = 6"]


def test_rollback_to_a_plan_step_keeps_the_plan_and_the_steps_before_it():
    seed("p", "plan", "weather in Paris and Rome, which is warmer?")
    rows = [c for c in checkpoints("p") if c["node"] == "executor"]
    first_step = rows[-1]["checkpoint_id"]  # newest first: the last row is the first step

    result = run_cli("rollback", "-t", "p", "--checkpoint", first_step)
    assert result.returncode == 0, result.stderr.decode()

    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, "p", make_context(settings))
        head = session.graph.get_state(session.config)
        assert len(head.values["plan"]) == 3 and len(head.values["step_results"]) == 1
        assert head.next == ("executor",)
        assert session.pending_step() == "next step: executor"
        result = session.resume(quiet())
    assert "warmer" in result.answer


def test_lessons_reach_long_term_memory_and_a_later_thread():
    settings = load_settings()
    lesson = "Look the weather up with get_weather before answering."
    first = ScriptedChatModel(
        script=[
            "It is sunny in Oslo.",
            Verdict(success=False, reason="made up"),
            Lesson(lesson=lesson),
            "I do not know the weather in Oslo.",
            Verdict(success=True, reason="honest"),
        ]
    )
    later = ScriptedChatModel(script=["I will look it up."])
    with open_checkpointer(settings.db) as saver, open_memory(settings) as memory:
        for thread, model in (("one", first), ("two", later)):
            context = make_context(settings, model=model, memory=memory, user="alice")
            session = ChatSession(
                settings, saver, thread, context, memory=memory, user="alice", strategy="reflexion"
            )
            session.run_turn("what is the weather in Oslo", quiet())
        saved = [i.text for i in memory.list("alice", kind="experiences")]
    assert any(lesson in text and text.startswith("lesson for:") for text in saved)
    # The later thread gets it in a section before the user's message; its system prompt stays the
    # fixed one.
    *_, notes, asked = later.calls[0]
    assert lesson in notes.content and lesson not in later.calls[0][0].content
    assert asked.content == "what is the weather in Oslo"
    first.assert_done()


def test_graph_prints_each_strategy_as_mermaid():
    result = run_cli("graph", "--strategy", "plan")
    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode()
    for edge in (
        "__start__ -.-> planner",
        "__start__ -.-> summarize",
        "planner -.-> executor",
        "executor -.-> executor",
        "executor -.-> planner",
        "executor -.-> synthesizer",
        "retry -.-> planner",
        "synthesizer -.-> __end__",
    ):
        assert edge in text
    reflexion = run_cli("graph", "--strategy", "reflexion").stdout.decode()
    assert "reflect --> attempt" in reflexion and "evaluate -.-> reflect" in reflexion
    assert "%% attempt: the tool loop, run as a subgraph" in reflexion
    assert "agent -.-> tools" in reflexion
    assert "classify -.-> calculator" in run_cli("graph", "--strategy", "routed").stdout.decode()
    bad = run_cli("graph", "--strategy", "nope")
    assert bad.returncode == 2
    choices = ", ".join(repr(name) for name in STRATEGY_NAMES)
    assert f"'nope' is not one of {choices}" in bad.stderr.decode()


def test_chat_with_strategy_plan_from_the_command_line():
    result = run_cli("chat", "-t", "cli", "--strategy", "plan", "-m", "what is 6 times 7")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "6 * 7 = 42\n"
    stderr = result.stderr.decode()
    assert "plan:\n  1. calculator expression: 6 * 7 — the arithmetic\n" in stderr
    again = run_cli("chat", "-t", "cli", "-m", "what is 1 plus 1")
    assert "plan:" in again.stderr.decode()  # the thread's strategy is kept


def test_chat_with_reflexion_shows_trials_and_verdicts(isolated):
    result = run_cli(
        "chat", "-t", "rx", "--strategy", "reflexion", "--max-trials", "2", "-m", "read gone.txt"
    )
    assert result.returncode == 1, result.stderr.decode()  # the file could not be read
    stderr = result.stderr.decode()
    assert "attempt 1/2" in stderr and "attempt 2/2" in stderr
    assert "✗ evaluation of attempt 1: failure" in stderr and "lesson: read_file failed" in stderr


def test_show_prints_a_plan_with_each_step_result():
    seed("s", "plan", "what is 6 times 7 plus 2")
    shown = show("s")
    assert shown["strategy"] == "plan"
    assert shown["plan"][0]["tool"] == "calculator"
    assert shown["step_results"][0]["result"] == "44"
    text = run_cli("show", "-t", "s").stderr.decode()
    assert "plan 1. calculator expression: 6 * 7 + 2 → success: 44" in text


@pytest.mark.parametrize("strategy", [n for n, s in STRATEGIES.items() if s.subgraph_nodes])
def test_replay_in_a_subgraph_strategy_asks_before_a_side_effect_runs_again(strategy: str):
    settings = load_settings()
    settings.workspace.mkdir(parents=True, exist_ok=True)
    seed("w", strategy, "write hello to notes.txt")
    notes = settings.workspace / "notes.txt"
    assert notes.read_text() == "hello"
    notes.unlink()  # writing it again creates it: no risk by its arguments, but a side effect
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, "w", make_context(settings))
        oldest_first = reversed(list(session.graph.get_state_history(session.config)))
        start = next(  # the turn's first step: the attempt (reflexion) or the route (routed)
            s
            for s in oldest_first
            if s.metadata.get("turn") == 1 and s.next not in {(), ("__start__",)}
        )
        asked: list[list[dict]] = []

        def refuse(calls):  # type: ignore[no-untyped-def]
            asked.append(calls)
            return False

        session.replay(start.config["configurable"]["checkpoint_id"], quiet(), refuse)
        assert [c["name"] for c in asked[0]] == ["write_file"]
        assert not notes.exists()  # refused: not written again
        messages = session.graph.get_state(session.config).values["messages"]
        assert any("not run" in str(m.content) for m in messages if m.type == "tool")

        session.replay(start.config["configurable"]["checkpoint_id"], quiet(), lambda calls: True)
    assert notes.read_text() == "hello"  # confirmed: written again
