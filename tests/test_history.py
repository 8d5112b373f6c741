"""`history` reads the stored rows as data (app/service/history.py) instead of loading states through
LangGraph. For every kind of thread — tool calls and tool failures, approvals answered, edited and
still pending, rollbacks, replays, a fork from the middle of a turn, every strategy, a summarised
thread and one past a stored snapshot of its messages — it must say what loading the states says:
the same turns, and at every checkpoint of the branch the same messages, counters and next nodes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from rich.console import Console

from app.cli.render import JsonlRenderer
from app.config import load_settings
from app.db import open_database
from app.db.base import Database
from app.service import api
from app.service.context import make_context
from app.service.history import StoredStates, TurnSummary
from app.service.index import CheckpointIndex
from app.service.outcome import turn_status
from app.service.session import ChatSession
from app.service.threads import thread_config, thread_graph
from graphs.react.graph import build_graph
from graphs.shared.messages import current_turn, new_message_id
from graphs.state import turn_input
from tests.conftest import run_cli


def graph_history(database: Database, thread_id: str) -> list[TurnSummary]:
    """What `history` showed when it loaded the last state of each turn through the graph."""
    index = CheckpointIndex(database, thread_id)
    graph = thread_graph(database.saver, thread_id)
    groups: dict[int, list] = {}
    for row in index.branch():
        if row.turn is not None:
            groups.setdefault(row.turn, []).append(row)
    summaries = []
    for turn in sorted(groups, reverse=True):
        rows = groups[turn]
        snapshot = graph.get_state(thread_config(thread_id, rows[-1].checkpoint_id))
        values = snapshot.values
        status = turn_status(values) if values.get("status") or not snapshot.next else "interrupted"
        summaries.append(
            TurnSummary(
                turn=turn,
                preview=next((r.preview for r in rows if r.preview), ""),
                status=status,
                steps=len(rows),
                iteration=values.get("iteration", 0),
                retry_count=values.get("retry_count", 0),
                tools=[
                    call["name"]
                    for m in current_turn(values.get("messages", []))
                    if isinstance(m, AIMessage)
                    for call in m.tool_calls
                ],
                checkpoint_id=rows[-1].checkpoint_id,
                updated_at=rows[-1].created_at,
                success=status == "answered",
            )
        )
    return summaries


def assert_reads_as_the_graph_loads(database: Database, thread_id: str) -> None:
    index = CheckpointIndex(database, thread_id)
    branch = index.branch()
    stored = StoredStates(database, thread_id, branch, {row.checkpoint_id for row in branch})
    graph = thread_graph(database.saver, thread_id)
    for row in branch:
        snapshot = graph.get_state(thread_config(thread_id, row.checkpoint_id))
        values = stored.values(row.checkpoint_id)
        where = (thread_id, row.checkpoint_id, row.node)
        assert [(m.fields.get("id"), m.fields.get("content")) for m in values["messages"]] == [
            (m.id, m.content) for m in snapshot.values["messages"]
        ], where
        assert sorted(stored.next_nodes(row.checkpoint_id)) == sorted(snapshot.next), where
        for key in ("turn", "status", "iteration", "retry_count", "strategy", "plan", "trial"):
            assert values.get(key) == snapshot.values.get(key), (*where, key)
    found = api.history(database, thread_id)
    assert found.turns == graph_history(database, thread_id)
    assert found.total_turns == len({r.turn for r in branch if r.turn is not None})


def session_turns(thread: str, *texts: str, approver=None, **overrides: object) -> None:  # type: ignore[no-untyped-def]
    settings = load_settings(**overrides)
    with open_database(settings.db) as database:
        session = ChatSession(settings, database.saver, thread, make_context(settings))
        for text in texts:
            session.run_turn(text, JsonlRenderer(Console(file=io.StringIO())), approver)


def pause_for_approval(thread: str) -> None:
    """A turn left waiting for the person's approval (nobody answers it)."""
    settings = load_settings(approve="ask")
    with open_database(settings.db) as database:
        text = "write 'new' to a.txt"
        build_graph(database.saver).invoke(
            turn_input(HumanMessage(text, id=new_message_id("human")), 1),
            thread_config(thread, metadata={"turn": 1, "preview": text}),
            context=make_context(settings),
            durability="sync",
        )


def checkpoints(thread: str) -> list[dict]:
    return json.loads(run_cli("history", "-t", thread, "--all", "--json").stdout)


def test_history_reads_every_kind_of_thread_as_the_graph_loads_it(
    database: str, isolated: Path, monkeypatch: pytest.MonkeyPatch
):
    workspace = isolated / "workspace"
    workspace.mkdir()
    (workspace / "a.txt").write_text("old")
    session_turns(
        "tools",
        "what is 6 times 7",
        "weather in Paris and London tomorrow",
        "read missing.txt",
        "hello there",
        "write 'fresh' to b.txt",
    )
    session_turns(
        "edited",
        "write 'new' to a.txt",
        approver=lambda calls: {
            c["id"]: {"action": "edit", "args": {**c["args"], "content": "edited"}} for c in calls
        },
        approve="ask",
    )
    pause_for_approval("paused")
    for strategy in ("plan", "reflexion", "routed"):
        session_turns(strategy, "what is 6 times 7", "read missing.txt", strategy=strategy)

    session_turns("rolled", "what is 1 plus 1", "what is 2 plus 2", "what is 3 plus 3")
    assert run_cli("rollback", "-t", "rolled", "--turns", "1").returncode == 0
    session_turns("rolled", "what is 4 plus 4")
    mid_turn = next(r for r in checkpoints("rolled") if r["node"] == "tools")
    assert run_cli("rollback", "-t", "rolled", "-c", mid_turn["checkpoint_id"]).returncode == 0

    session_turns("replayed", "what is 6 times 7", "what is 5 times 5")
    start = next(r for r in checkpoints("replayed") if r["source"] == "loop" and r["step"] == 0)
    assert run_cli("replay", "-t", "replayed", "-c", start["checkpoint_id"]).returncode == 0

    mid = next(r for r in checkpoints("tools") if r["node"] == "agent")
    assert (
        run_cli("fork", "-t", "tools", "--to", "forked", "-c", mid["checkpoint_id"]).returncode == 0
    )

    monkeypatch.setenv("APP_CONTEXT_TOKENS", "500")
    session_turns(
        "summarised",
        *(
            f"my name is Ada and I live in Paris; note {n}: " + "lorem ipsum " * 30
            for n in range(8)
        ),
    )
    monkeypatch.delenv("APP_CONTEXT_TOKENS")
    assert any(r["node"] == "summarize" for r in checkpoints("summarised"))
    # 27 turns of four messages each: past the snapshot LangGraph stores every 100 updates
    session_turns("long", *(f"what is {n} plus {n}" for n in range(27)))

    settings = load_settings()
    with open_database(settings.database) as opened:
        for thread in (
            "tools",
            "edited",
            "paused",
            "plan",
            "reflexion",
            "routed",
            "rolled",
            "replayed",
            "forked",
            "summarised",
            "long",
        ):
            assert_reads_as_the_graph_loads(opened, thread)
        assert api.history(opened, "paused").turns[0].status == "interrupted"
        assert api.history(opened, "long", 20).total_turns == 27
        assert len(api.history(opened, "long", 20).turns) == 20


def test_an_unreadable_head_is_an_error_not_a_partial_listing(database: str):
    session_turns("v", "what is 6 times 7")
    with open_database(load_settings().database) as opened:
        head = CheckpointIndex(opened, "v").head.checkpoint_id
    assert run_cli("history", "-t", "v").returncode == 0
    from tests.db_helpers import execute

    execute(
        database,
        "UPDATE checkpoints SET checkpoint = ?, type = 'msgpack' WHERE checkpoint_id = ?",
        "UPDATE checkpoints SET checkpoint = %s::jsonb WHERE checkpoint_id = %s",
        (b"\x93\x01\x02\x03" if not database.startswith("postgres") else '{"id": 5}', head),
    )
    result = run_cli("history", "-t", "v")
    assert result.returncode == 3
    assert f"checkpoint {head} of thread v is unreadable" in result.stderr.decode()


def test_the_decoder_knows_langgraphs_extension_codes():
    from langgraph.checkpoint.serde import jsonplus

    from app.db import raw

    for name in (
        "EXT_CONSTRUCTOR_SINGLE_ARG",
        "EXT_CONSTRUCTOR_POS_ARGS",
        "EXT_CONSTRUCTOR_KW_ARGS",
        "EXT_METHOD_SINGLE_ARG",
        "EXT_PYDANTIC_V1",
        "EXT_PYDANTIC_V2",
        "EXT_DELTA_SNAPSHOT",
    ):
        assert getattr(raw, name) == getattr(jsonplus, name), name
