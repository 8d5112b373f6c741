"""A tool call with side effects runs once although the process running its turn is killed after
the call returned and before its step finished: the resumed turn gets the recorded result
(graphs/shared/recorded.py). Where the saver matters, on SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pexpect
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from app.config import load_settings
from app.service.context import make_context
from app.service.session import ChatSession
from app.store import open_checkpointer
from graphs.catalog import STRATEGY_NAMES
from graphs.react.graph import build_graph
from graphs.shared.messages import RECORDED_TASK
from graphs.shared.recorded import HOLD_AFTER_RECORD
from graphs.shared.tool_calls import run_tool_calls
from graphs.state import AgentContext, turn_input
from tests.conftest import REPO, run_cli
from tests.fakes import ScriptedChatModel, ai_calls, call

SCRIPT = REPO / "tests" / "scripts" / "recorded_turn.py"
ASYNC_SCRIPT = REPO / "tests" / "scripts" / "async_turn.py"
ENV = {"PYTHONPATH": str(REPO), "TERM": "dumb", "PROMPT_TOOLKIT_NO_CPR": "1"}


def start_held_turn(
    folder: Path, scenario: str, strategy: str, held: list[str], *options: str
) -> subprocess.Popen:
    """A real `chat` turn (with CLI `options`), held once every call in `held` has returned and
    its result is recorded: until the test kills it."""
    args = ["chat", "--jsonl", "-t", "T", "--strategy", strategy, "-m", "append a line", *options]
    return start_held(folder, [str(SCRIPT), scenario, str(folder / "count"), *args], held)


def start_held(folder: Path, command: list[str], held: list[str]) -> subprocess.Popen:
    """`python COMMAND` with WAYPOINT_TEST_HOLD_AFTER_RECORD set, once it holds after recording
    every call in `held`."""
    hold = folder / "hold"
    hold.mkdir()
    os.mkfifo(hold / "release")  # nobody opens it for writing: the process stays held
    process = subprocess.Popen(
        [sys.executable, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **ENV, HOLD_AFTER_RECORD: str(hold)},
    )
    markers = [hold / f"{call_id}.recorded" for call_id in held]
    deadline = time.monotonic() + 90
    try:
        while not all(m.exists() for m in markers):
            assert process.poll() is None, process.communicate()[1].decode()
            assert time.monotonic() < deadline, "the tool's result was never recorded"
            time.sleep(0.05)
    except BaseException:
        process.kill()
        process.communicate()
        raise
    assert {json.loads(m.read_text())["pid"] for m in markers} == {process.pid}
    return process


def kill_held(process: subprocess.Popen, folder: Path) -> None:
    """SIGKILL the held process; with the FIFO gone, a process that ran a call again would log it
    in ran.jsonl and go on instead of waiting."""
    process.kill()
    process.communicate(timeout=30)
    (folder / "hold" / "release").unlink()


def after_kill_env(folder: Path) -> dict[str, str]:
    """The environment of the process that continues the thread: logging what it runs."""
    return {**os.environ, **ENV, HOLD_AFTER_RECORD: str(folder / "hold")}


def runs_of(folder: Path) -> Counter:
    """How many times each recorded call ran, in every process."""
    lines = (folder / "hold" / "ran.jsonl").read_text().splitlines()
    return Counter(json.loads(line)["call_id"] for line in lines)


def resume_in_repl(folder: Path, scenario: str, strategy: str, answer: str, *options: str) -> str:
    """Open the thread in a new REPL process (with CLI `options`) and choose "resume"; what it
    printed from then to the answer. (The strategy is named: a first turn killed inside
    reflexion's attempt has not stored it yet.)"""
    args = ["chat", "--thread", "T", "--strategy", strategy, *options]
    child = pexpect.spawn(
        sys.executable,
        [str(SCRIPT), scenario, str(folder / "count"), *args],
        env={**after_kill_env(folder), "RECORDED_TURN_RESUME": "1"},
        encoding="utf-8",
        timeout=90,
        dimensions=(50, 160),
    )
    child.expect("esume it or")
    child.sendline("r")
    child.expect(answer)
    shown = child.before
    child.expect("T>")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    return shown


def thread_messages() -> list:
    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, "T", make_context(settings, ScriptedChatModel()))
        return session.graph.get_state(session.config).values.get("messages", [])


def results_of(messages: list, call_id: str) -> list[str]:
    return [
        str(m.content) for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]


def killed_and_resumed(folder: Path, scenario: str, strategy: str) -> None:
    """Kill the turn after its call was recorded, resume it in a new process: the call ran once
    and the turn ends with the recorded result."""
    call_id = "call_plan_t1_s1_r0" if strategy == "plan" else "once-1"  # plan's own id for step 1
    process = start_held_turn(folder, scenario, strategy, [call_id])
    kill_held(process, folder)
    assert (folder / "count").read_text() == "one\n"

    answer = "done" if strategy == "plan" else "all done"
    shown = resume_in_repl(folder, scenario, strategy, answer)

    assert "appended one" in shown  # its card, shown again from the record

    assert (folder / "count").read_text() == "one\n"
    messages = thread_messages()
    assert results_of(messages, call_id) == ["appended one"]
    assert runs_of(folder) == {call_id: 1}
    assert isinstance(messages[-1], AIMessage) and messages[-1].content == answer


def test_a_killed_turn_resumed_runs_its_side_effect_once(isolated: Path, database: str):
    killed_and_resumed(isolated, "one", "react")


@pytest.mark.parametrize("strategy", [n for n in STRATEGY_NAMES if n != "react"])
def test_every_strategy_runs_a_side_effect_once_across_a_kill(isolated: Path, strategy: str):
    # plan's executor runs the call itself; reflexion's attempt and routed's tool loop run react's
    # loop as a subgraph, whose own checkpoint the resumed node continues from
    killed_and_resumed(isolated, strategy, strategy)


def test_parallel_calls_each_get_their_own_recorded_result(isolated: Path):
    process = start_held_turn(isolated, "parallel", "react", ["once-1", "once-3"])
    kill_held(process, isolated)

    resume_in_repl(isolated, "parallel", "react", "all done")

    assert sorted((isolated / "count").read_text().splitlines()) == ["first", "second"]
    messages = thread_messages()
    assert results_of(messages, "once-1") == ["appended first"]
    assert results_of(messages, "once-3") == ["appended second"]
    # the read-only call is not recorded: it ran again, and saw both lines
    assert results_of(messages, "once-2") == ["2 lines"]
    assert runs_of(isolated) == {"once-1": 1, "once-3": 1}


def test_a_new_turn_after_the_kill_answers_the_call_with_its_recorded_result(
    isolated: Path, database: str
):
    process = start_held_turn(isolated, "one", "react", ["once-1"])
    kill_held(process, isolated)

    args = ["chat", "--jsonl", "-t", "T", "-m", "and now?"]
    after = subprocess.run(
        [sys.executable, str(SCRIPT), "one", str(isolated / "count"), *args],
        capture_output=True,
        timeout=90,
        env={**after_kill_env(isolated), "RECORDED_TURN_RESUME": "1"},
    )

    assert after.returncode == 0, after.stderr.decode()
    assert (
        "was interrupted; 1 finished tool call kept with its recorded result"
        in (after.stdout + after.stderr).decode()
    )
    assert (isolated / "count").read_text() == "one\n"
    assert results_of(thread_messages(), "once-1") == ["appended one"]
    assert runs_of(isolated) == {"once-1": 1}


@pytest.mark.parametrize(
    ("saver", "strategy"), [("sqlite", "react"), ("postgres", "react"), ("sqlite", "reflexion")]
)
def test_on_an_async_engine_the_resumed_run_returns_the_recorded_result(
    isolated: Path, request: pytest.FixtureRequest, saver: str, strategy: str
):
    # LangGraph's server and Aegra run graphs with astream, an async saver and durability "async";
    # the script's saver is slow to save checkpoints, so steps run ahead of their checkpoints
    db = request.getfixturevalue("pg_url") if saver == "postgres" else str(isolated / "a.sqlite")
    turn = [str(ASYNC_SCRIPT), db, str(isolated / "count"), strategy]
    process = start_held(isolated, [*turn, "run"], ["once-1"])
    kill_held(process, isolated)

    resumed = subprocess.run(
        [sys.executable, *turn, "resume"],
        capture_output=True,
        timeout=90,
        env=after_kill_env(isolated),
    )

    assert resumed.returncode == 0, resumed.stderr.decode()
    assert (isolated / "count").read_text() == "one\n"
    messages = [json.loads(line) for line in resumed.stdout.decode().splitlines()]
    assert ["tool", "appended one"] in messages and messages[-1] == ["ai", "all done"]
    assert runs_of(isolated) == {"once-1": 1}


def test_a_record_of_another_call_is_never_returned_for_this_one(isolated: Path):
    # Resumed with approvals refused, append_line becomes the step's first recorded call: the slot
    # whose record holds append_risky's result. It must get its own result, so it runs again
    # (at-least-once in this one case: the step's calls changed between the runs).
    held = ["once-1", "once-3"]
    process = start_held_turn(isolated, "mismatch", "react", held, "--approve", "auto")
    kill_held(process, isolated)

    resume_in_repl(isolated, "mismatch", "react", "all done", "--approve", "never")

    messages = thread_messages()
    assert results_of(messages, "once-3") == ["appended second"]
    assert results_of(messages, "once-1")[0].startswith("not run")
    assert (isolated / "count").read_text().splitlines().count("second") == 2


def test_a_recorded_call_shows_as_one_tool_card_and_no_node_of_its_own(isolated: Path):
    args = ["chat", "--jsonl", "-t", "T", "-m", "append a line"]
    turn = subprocess.run(
        [sys.executable, str(SCRIPT), "one", str(isolated / "count"), *args],
        capture_output=True,
        timeout=90,
        env={**os.environ, **ENV},
    )

    assert turn.returncode == 0, turn.stderr.decode()
    events = [json.loads(line) for line in turn.stdout.decode().splitlines()]
    assert [e["node"] for e in events if e["event"] == "node"] == ["agent", "tools", "agent"]
    assert [e["event"] for e in events if e.get("id") == "once-1"] == ["tool_call", "tool_result"]


def test_a_replay_from_before_the_tools_step_runs_the_call_again(isolated: Path):
    # A replay re-executes on purpose (after --yes): the recorded result is not returned there
    assert (
        run_cli("chat", "-t", "s", "-m", "write 'v1' to a.txt", "--approve", "auto").returncode == 0
    )
    written = isolated / "workspace" / "a.txt"
    written.unlink()
    every = json.loads(run_cli("history", "-t", "s", "--all", "--json").stdout)
    before_tools = next(r for r in every if r["source"] == "loop" and r["step"] == 1)

    replayed = run_cli("replay", "-t", "s", "-c", before_tools["checkpoint_id"], "--yes")

    assert replayed.returncode == 0, replayed.stderr.decode()
    assert written.read_text() == "v1"


# --- where nothing is recorded --------------------------------------------------------------------


def appender(ran: list[str]):  # type: ignore[no-untyped-def]
    def append_line(text: str) -> str:
        ran.append(text)
        return f"appended {text}"

    made = tool(append_line, description="Append a line (test helper with side effects).")
    made.metadata = {"side_effects": True}
    return made


def test_outside_a_graph_run_a_side_effecting_call_just_runs():
    ran: list[str] = []
    request = ai_calls(call("append_line", {"text": "x"}, "c1"))

    [result] = run_tool_calls(request, {"append_line": appender(ran)}, lambda event: None, 1000)

    assert (ran, result.content) == (["x"], "appended x")


@pytest.mark.parametrize(("durability", "recorded"), [("sync", True), ("exit", False)])
def test_a_run_that_saves_nothing_until_it_ends_records_nothing(durability: str, recorded: bool):
    ran: list[str] = []
    model = ScriptedChatModel(script=[ai_calls(call("append_line", {"text": "x"}, "c1")), "ok"])
    context = AgentContext(model=model, tools=[appender(ran)], system_prompt="x")
    graph = build_graph(InMemorySaver())
    turn = turn_input(HumanMessage("go", id="h1"), 1)
    config = {"configurable": {"thread_id": "t"}}

    updates = list(graph.stream(turn, config, context=context, durability=durability))

    assert ran == ["x"]
    assert any(RECORDED_TASK in update for update in updates) is recorded
