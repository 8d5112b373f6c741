"""Risky tool calls (overwriting or editing files, untrusted MCP tools) are approved, edited or
rejected before they run; a pending approval survives the process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graphs.react.graph import build_graph
from graphs.shared.approvals import risk_of
from graphs.state import AgentContext, turn_input
from tests.conftest import REPO, run_cli
from tests.fakes import ScriptedChatModel, ai_calls, call
from tools import default_tools

OVERWRITE = ai_calls(call("write_file", {"path": "a.txt", "content": "new"}, "w1"))


def setup(tmp_path: Path, policy: str, *script) -> tuple:  # type: ignore[no-untyped-def]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("old")
    model = ScriptedChatModel(script=list(script))
    context = AgentContext(
        model=model, tools=default_tools(workspace), approval=policy, sleep=lambda s: None
    )
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke(turn_input(HumanMessage("overwrite it", id="h1"), 1), config, context=context)
    return graph, config, context, workspace


def test_risk_is_declared_by_the_tools(tmp_path: Path):
    tools = {t.name: t for t in default_tools(tmp_path)}
    (tmp_path / "a.txt").write_text("x")
    assert risk_of(tools["write_file"], {"path": "a.txt", "content": ""}) == (
        "overwrites the existing file 'a.txt'"
    )
    assert risk_of(tools["write_file"], {"path": "new.txt", "content": ""}) is None
    assert risk_of(tools["edit_file"], {"path": "a.txt"}) == "edits the file 'a.txt'"
    assert risk_of(tools["calculator"], {"expression": "1"}) is None
    mcp_tool = StructuredTool.from_function(
        lambda: "x",
        name="remote",
        description="d",
        metadata={"mcp_server": "srv", "trusted": False},
    )
    assert risk_of(mcp_tool, {}) == "calls the external MCP server 'srv'"
    mcp_tool.metadata["trusted"] = True
    assert risk_of(mcp_tool, {}) is None


def test_policy_auto_runs_it(tmp_path: Path):
    graph, config, _, workspace = setup(tmp_path, "auto", OVERWRITE, "done")
    assert (workspace / "a.txt").read_text() == "new"
    assert graph.get_state(config).values["status"] == "answered"


def test_policy_never_refuses_it_and_tells_the_model(tmp_path: Path):
    graph, config, _, workspace = setup(tmp_path, "never", OVERWRITE, "I could not overwrite it.")
    assert (workspace / "a.txt").read_text() == "old"
    result = next(m for m in graph.get_state(config).values["messages"] if m.type == "tool")
    assert result.status == "error" and "was not approved (the approval policy is 'never')" in (
        result.content
    )


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"action": "approve"}, "new"),
        ({"action": "edit", "args": {"path": "a.txt", "content": "edited"}}, "edited"),
        ({"action": "reject", "note": "no thanks"}, "old"),
    ],
)
def test_policy_ask_pauses_the_graph_until_answered(tmp_path: Path, decision, expected):
    graph, config, context, workspace = setup(tmp_path, "ask", OVERWRITE, "done")
    paused = graph.get_state(config)
    assert paused.next == ("tools",)
    [question] = paused.tasks[0].interrupts
    assert question.value == {
        "type": "approval",
        "calls": [
            {
                "id": "w1",
                "name": "write_file",
                "args": {"path": "a.txt", "content": "new"},
                "reason": "overwrites the existing file 'a.txt'",
            }
        ],
    }
    assert (workspace / "a.txt").read_text() == "old"
    graph.invoke(Command(resume={"w1": decision}), config, context=context)
    assert (workspace / "a.txt").read_text() == expected
    after = graph.get_state(config)
    assert after.next == ()
    # the history and the model's context say what ran, edited arguments included
    [ran] = [m for m in after.values["messages"] if m.type == "ai" and m.tool_calls]
    ran_args = decision.get("args", {"path": "a.txt", "content": "new"})
    assert ran.tool_calls[0]["args"] == ran_args  # replaced in place (one message), not added
    assert context.model.calls[-1][-2].tool_calls[0]["args"] == ran_args


def test_one_shot_without_a_terminal_uses_an_explicit_policy(isolated: Path):
    workspace = isolated / "workspace"
    workspace.mkdir()
    (workspace / "a.txt").write_text("old")
    refused = run_cli("chat", "-t", "p", "-m", "write 'new' to a.txt")
    assert "approval policy: never" in refused.stderr.decode()
    assert (workspace / "a.txt").read_text() == "old"
    assert "not approved" in refused.stdout.decode()
    allowed = run_cli("chat", "-t", "p", "--approve", "auto", "-m", "write 'new' to a.txt")
    assert "approval policy: auto" in allowed.stderr.decode()
    assert (workspace / "a.txt").read_text() == "new"


def test_a_pending_approval_survives_the_process_and_is_asked_again(isolated: Path):
    workspace = isolated / "workspace"
    workspace.mkdir()
    (workspace / "a.txt").write_text("old")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "dumb"}

    def spawn() -> pexpect.spawn:
        return pexpect.spawn(
            sys.executable,
            ["-m", "app", "chat", "--thread", "ap"],
            env=env,
            encoding="utf-8",
            timeout=60,
            dimensions=(50, 160),
        )

    first = spawn()
    first.expect("ap>")
    first.sendline("write 'new' to a.txt")
    first.expect("approve write_file")
    first.expect("overwrites the existing file 'a.txt'")
    first.expect("pprove, ")
    first.kill(9)
    first.wait()
    assert (workspace / "a.txt").read_text() == "old"

    second = spawn()
    second.expect("waiting for your approval")
    second.expect("pprove, ")
    second.sendline("a")
    second.expect("ap>")
    second.sendline("/exit")
    second.expect(pexpect.EOF)
    assert (workspace / "a.txt").read_text() == "new"


def test_resuming_a_killed_turn_asks_for_its_approval_at_once(isolated: Path):
    import dataclasses
    import io

    from rich.console import Console

    from app.cli.render import JsonlRenderer
    from app.config import load_settings
    from app.service.context import make_context
    from app.service.session import ChatSession
    from app.store import open_checkpointer

    settings = load_settings()
    workspace = settings.workspace
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "a.txt").write_text("old")
    sink = JsonlRenderer(Console(file=io.StringIO()))
    with open_checkpointer(settings.db) as saver:
        killed = ChatSession(
            settings, saver, "k", make_context(settings, ScriptedChatModel(script=[OVERWRITE]))
        )
        # the turn stopped as a kill would stop it: its call made, the tools step not run
        killed.graph.invoke(
            turn_input(HumanMessage("overwrite it", id="h1"), 1),
            killed.config,
            context=dataclasses.replace(killed.context, approval="auto"),
            interrupt_before=["tools"],
        )
        asked: list[list[dict]] = []

        def approver(calls: list[dict]) -> dict:
            asked.append(calls)
            return {c["id"]: {"action": "approve"} for c in calls}

        context = make_context(settings, ScriptedChatModel(script=["done"]), approval="ask")
        resumed = ChatSession(settings, saver, "k", context).resume(sink, approver)

    assert [[c["name"] for c in calls] for calls in asked] == [["write_file"]]
    assert (workspace / "a.txt").read_text() == "new"
    assert (resumed.status, resumed.answer) == ("answered", "done")
