"""Maintenance: sizes per thread, delete, DeltaChannel-aware prune (kept checkpoints load unchanged), vacuum."""

from __future__ import annotations

import functools
import operator
import shutil
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from app.db import open_database
from app.db.base import Database
from app.db.sqlite_lock import ThreadLock
from app.errors import UsageError
from app.models.offline import OfflineChatModel
from app.service.maintenance import PruneReport, delete_thread, prune, thread_sizes, vacuum
from app.service.threads import list_threads
from graphs.react.graph import build_graph
from graphs.state import AgentContext, turn_input
from tools import default_tools


def concatenate(items: list[str], batches: list[list[str]]) -> list[str]:
    return functools.reduce(operator.add, batches, items)


class SmallState(TypedDict):
    items: Annotated[list[str], DeltaChannel(concatenate, snapshot_frequency=3)]
    turn: int


def add_answer(state: SmallState) -> dict:
    return {"items": [f"answer {state['turn']}"]}


def build_small_graph(saver: SqliteSaver):
    """A graph whose delta channel snapshots every 3 updates, so short threads have many snapshots."""
    graph = StateGraph(SmallState)
    graph.add_node("add_answer", add_answer)
    graph.add_edge(START, "add_answer")
    graph.add_edge("add_answer", END)
    return graph.compile(checkpointer=saver)


def run_turns(graph, thread: str, count: int, context: AgentContext | None = None) -> None:
    config = {"configurable": {"thread_id": thread}}
    for _ in range(count):
        turn = graph.get_state(config).values.get("turn", 0) + 1
        if context is None:
            update = {"items": [f"question {turn}"], "turn": turn}
        else:
            update = turn_input(
                HumanMessage(f"what is {turn} plus {turn}", id=f"h-{thread}-{turn}"), turn
            )
        run_config = {**config, "metadata": {"turn": turn}}
        graph.invoke(update, run_config, context=context, durability="sync")


def roll_back_to_end_of_turn(graph, thread: str, turn: int) -> None:
    config = {"configurable": {"thread_id": thread}}
    target = next(
        s for s in graph.get_state_history(config) if s.metadata.get("turn") == turn and not s.next
    )
    graph.update_state(target.config, None, as_node="__copy__")


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """long: 60 turns, rolled back to turn 58, then 2 new turns (snapshots at ~turns 25 and 50);
    short: 3 turns, rolled back to turn 1, then 1 new turn (no snapshot); small: 12 turns, snapshots
    every 3 updates."""
    root = tmp_path_factory.mktemp("template")
    db = root / "agent.sqlite"
    context = AgentContext(model=OfflineChatModel(), tools=default_tools(root / "workspace"))
    with open_database(db) as database:
        saver = database.saver
        graph = build_graph(saver)
        run_turns(graph, "long", 60, context)
        roll_back_to_end_of_turn(graph, "long", 58)
        run_turns(graph, "long", 2, context)
        run_turns(graph, "short", 3, context)
        roll_back_to_end_of_turn(graph, "short", 1)
        run_turns(graph, "short", 1, context)
        run_turns(build_small_graph(saver), "small", 12)
    return db


@pytest.fixture
def db(template_db: Path, db_path: Path) -> Path:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template_db, db_path)
    return db_path


def rows(connection: sqlite3.Connection, table: str, where: str = "1", *params) -> set[tuple]:
    return set(connection.execute(f"SELECT * FROM {table} WHERE {where}", params).fetchall())


def checkpoint_ids(connection: sqlite3.Connection, thread: str) -> set[str]:
    query = "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?"
    return {cid for (cid,) in connection.execute(query, (thread,))}


def states(graph, thread: str, ids: set[str]) -> dict[str, tuple]:
    """What loading each checkpoint gives: values, next nodes, metadata."""
    snapshots = {}
    for cid in ids:
        snapshot = graph.get_state({"configurable": {"thread_id": thread, "checkpoint_id": cid}})
        snapshots[cid] = (snapshot.values, snapshot.next, snapshot.metadata)
    return snapshots


def branch_of_head(connection: sqlite3.Connection, thread: str) -> list[tuple[str, int | None]]:
    """(checkpoint id, turn) from the head back to the root, following parent ids."""
    parents = {
        cid: (parent, turn)
        for cid, parent, turn in connection.execute(
            "SELECT checkpoint_id, parent_checkpoint_id, "
            "json_extract(CAST(metadata AS TEXT), '$.turn') FROM checkpoints WHERE thread_id = ?",
            (thread,),
        )
    }
    branch, current = [], max(parents)
    while current in parents:
        branch.append((current, parents[current][1]))
        current = parents[current][0]
    return branch


def last_turns_range(connection: sqlite3.Connection, thread: str, n: int) -> list[str]:
    """The head's branch, head first, down to the oldest checkpoint of its last n turns."""
    branch = branch_of_head(connection, thread)
    last = set(sorted({turn for _, turn in branch} - {None}, reverse=True)[:n])
    oldest = max(i for i, (_, turn) in enumerate(branch) if turn in last)
    return [cid for cid, _ in branch[: oldest + 1]]


def down_to_snapshot(saver: SqliteSaver, thread: str, n: int, channel: str) -> set[str]:
    """The last n turns of the head's branch plus their ancestors back to the nearest snapshot."""
    branch = [cid for cid, _ in branch_of_head(saver.conn, thread)]
    kept = last_turns_range(saver.conn, thread, n)
    for cid in branch[len(kept) - 1 :]:
        kept.append(cid)
        if has_snapshot(saver, thread, cid, channel):
            return set(kept)
    raise AssertionError(f"no snapshot of {channel} behind the last {n} turns of {thread}")


def has_snapshot(saver: SqliteSaver, thread: str, cid: str, channel: str) -> bool:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cid}}
    values = saver.get_tuple(config).checkpoint["channel_values"]
    return isinstance(values.get(channel), _DeltaSnapshot)


def prune_db(database: Database, **options) -> PruneReport:
    options = {"keep_last_turns": None, "older_than_days": None, "dry_run": False, **options}
    return prune(database, **options)


def test_thread_sizes_count_checkpoint_metadata_and_write_bytes(db: Path):
    with open_database(db) as database:
        sizes = thread_sizes(database)
    with sqlite3.connect(db) as connection:
        expected = {}
        for thread, checkpoint, metadata in connection.execute(
            "SELECT thread_id, checkpoint, metadata FROM checkpoints"
        ):
            expected[thread] = expected.get(thread, 0) + len(checkpoint) + len(metadata)
        for thread, value in connection.execute("SELECT thread_id, value FROM writes"):
            expected[thread] = expected.get(thread, 0) + len(value)
    assert sizes == expected
    assert set(sizes) == {"long", "short", "small"}
    assert sizes["long"] > sizes["short"]


def test_thread_sizes_counts_each_of_a_thousand_threads(db: Path):
    """Correct over many threads (its speed is measured by `python -m bench`, not here)."""
    with sqlite3.connect(db) as connection:
        for table in ("checkpoints", "writes"):
            columns = [r[1] for r in connection.execute(f"PRAGMA table_info({table})")]
            others = ", ".join(c for c in columns if c != "thread_id")
            connection.execute(
                f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) "
                f"INSERT INTO {table} (thread_id, {others}) "
                f"SELECT 'copy-' || i, {others} FROM n, {table} WHERE thread_id = 'short'"
            )
    with open_database(db) as database:
        sizes = thread_sizes(database)
    assert len(sizes) == 1003
    assert {sizes[f"copy-{i}"] for i in range(1, 1001)} == {sizes["short"]}


def test_delete_thread_removes_its_rows_only(db: Path):
    with open_database(db) as database:
        saver = database.saver
        other_checkpoints = rows(saver.conn, "checkpoints", "thread_id != 'long'")
        other_writes = rows(saver.conn, "writes", "thread_id != 'long'")
        checkpoints = len(checkpoint_ids(saver.conn, "long"))
        writes = len(rows(saver.conn, "writes", "thread_id = 'long'"))
        size = thread_sizes(database)["long"]

        report = delete_thread(database, "long")

        assert (report.checkpoints, report.writes, report.bytes_freed) == (
            checkpoints,
            writes,
            size,
        )
        assert checkpoints > 300 and writes > 1000
        assert [t.thread_id for t in list_threads(database)] == ["small", "short"]
        assert rows(saver.conn, "writes", "thread_id = 'long'") == set()
        assert rows(saver.conn, "checkpoints", "thread_id != 'long'") == other_checkpoints
        assert rows(saver.conn, "writes", "thread_id != 'long'") == other_writes
        with pytest.raises(UsageError, match="thread long does not exist"):
            delete_thread(database, "long")


def test_prune_keeps_last_turns_of_a_waypoint_thread_loadable_and_deletes_the_rest(db: Path):
    with open_database(db) as database:
        saver = database.saver
        graph = build_graph(saver)
        before_ids = checkpoint_ids(saver.conn, "long")
        before = states(graph, "long", before_ids)
        kept = set(last_turns_range(saver.conn, "long", 2))
        expected = down_to_snapshot(saver, "long", 2, "messages")

        report = prune_db(database, keep_last_turns=2)

        after_ids = checkpoint_ids(saver.conn, "long")
        assert kept <= after_ids
        # nothing but the kept turns and their way back to the nearest messages snapshot survives
        assert after_ids == expected
        assert len(after_ids) < len(before_ids) / 2
        assert states(graph, "long", after_ids) == {cid: before[cid] for cid in after_ids}
        head_values = before[max(after_ids)][0]
        assert len(head_values["messages"]) == 4 * 60  # 58 turns, then 2 after the rollback
        [long] = [t for t in report.threads if t.thread_id == "long"]
        assert long.checkpoints_deleted == len(before_ids) - len(after_ids)
        orphans = saver.conn.execute(
            "SELECT COUNT(*) FROM writes WHERE thread_id = 'long' AND checkpoint_id NOT IN "
            "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'long')"
        ).fetchone()[0]
        assert orphans == 0

        # the pruned thread goes on: a new turn is added to the whole conversation
        context = AgentContext(model=OfflineChatModel(), tools=default_tools(db.parent / "ws"))
        run_turns(graph, "long", 1, context)
        messages = graph.get_state({"configurable": {"thread_id": "long"}}).values["messages"]
        assert [m.content for m in messages[:1] + messages[-1:]] == [
            "what is 1 plus 1",
            "61 + 61 = 122",
        ]


def test_prune_with_frequent_snapshots_keeps_kept_checkpoints_identical(db: Path):
    with open_database(db) as database:
        saver = database.saver
        graph = build_small_graph(saver)
        before_ids = checkpoint_ids(saver.conn, "small")
        before = states(graph, "small", before_ids)
        expected = down_to_snapshot(saver, "small", 3, "items")

        prune_db(database, keep_last_turns=3)

        after_ids = checkpoint_ids(saver.conn, "small")
        assert after_ids == expected
        assert len(after_ids) < len(before_ids)
        assert states(graph, "small", after_ids) == {cid: before[cid] for cid in after_ids}
        head = graph.get_state({"configurable": {"thread_id": "small"}}).values["items"]
        assert head == [f"{kind} {n}" for n in range(1, 13) for kind in ("question", "answer")]


def test_prune_deletes_abandoned_branches_even_without_snapshots(db: Path):
    with open_database(db) as database:
        saver = database.saver
        graph = build_graph(saver)
        branch = {cid for cid, _ in branch_of_head(saver.conn, "short")}
        before_ids = checkpoint_ids(saver.conn, "short")
        before = states(graph, "short", before_ids)
        abandoned = before_ids - branch
        abandoned_writes = rows(saver.conn, "writes", "thread_id = 'short'")
        abandoned_writes = {w for w in abandoned_writes if w[2] in abandoned}
        assert len(abandoned) >= 10 and abandoned_writes

        report = prune_db(database, keep_last_turns=1)

        # no snapshot anywhere: the last turn needs its whole branch back to the root
        assert checkpoint_ids(saver.conn, "short") == branch
        assert states(graph, "short", branch) == {cid: before[cid] for cid in branch}
        remaining_writes = {w[2] for w in rows(saver.conn, "writes", "thread_id = 'short'")}
        assert not remaining_writes & abandoned
        [short] = [t for t in report.threads if t.thread_id == "short"]
        assert (short.checkpoints_deleted, short.writes_deleted) == (
            len(abandoned),
            len(abandoned_writes),
        )


def test_dry_run_deletes_nothing_and_reports_what_a_real_run_deletes(db: Path):
    with open_database(db) as database:
        saver = database.saver
        everything = (rows(saver.conn, "checkpoints"), rows(saver.conn, "writes"))
        stored = sum(thread_sizes(database).values())

        dry = prune_db(database, keep_last_turns=2, dry_run=True)

        assert (rows(saver.conn, "checkpoints"), rows(saver.conn, "writes")) == everything
        real = prune_db(database, keep_last_turns=2)
        assert sum(thread_sizes(database).values()) == stored - real.bytes_freed
    assert dry.dry_run and not real.dry_run
    assert dry.threads == real.threads
    assert {t.thread_id for t in real.threads} == {"long", "short", "small"}
    assert real.checkpoints_deleted > 0 and real.writes_deleted > 0


def age_thread(db: Path, thread: str, days: float) -> None:
    """Move a thread's checkpoint ids (UUIDv6, time first) `days` into the past."""
    ticks = int(days * 86400 * 10**7)

    def older(cid: str | None) -> str | None:
        if cid is None:
            return None
        value = uuid.UUID(cid).int
        stamp = (((value >> 80) << 12) | ((value >> 64) & 0x0FFF)) - ticks
        value &= ~((0xFFFFFFFFFFFF << 80) | (0x0FFF << 64))
        return str(uuid.UUID(int=value | ((stamp >> 12) << 80) | ((stamp & 0x0FFF) << 64)))

    with sqlite3.connect(db) as connection:
        connection.create_function("older", 1, older)
        connection.execute(
            "UPDATE checkpoints SET checkpoint_id = older(checkpoint_id), "
            "parent_checkpoint_id = older(parent_checkpoint_id) WHERE thread_id = ?",
            (thread,),
        )
        connection.execute(
            "UPDATE writes SET checkpoint_id = older(checkpoint_id) WHERE thread_id = ?", (thread,)
        )


def test_older_than_deletes_only_threads_idle_for_longer(db: Path):
    age_thread(db, "long", 20)
    age_thread(db, "short", 10)
    in_15_days = datetime.now(UTC) + timedelta(days=15)
    with open_database(db) as database:
        saver = database.saver
        size = thread_sizes(database)["long"]
        small = rows(saver.conn, "checkpoints", "thread_id != 'long'")

        report = prune_db(database, older_than_days=30, now=in_15_days)

        assert [t.thread_id for t in list_threads(database)] == ["small", "short"]
        assert rows(saver.conn, "checkpoints", "thread_id != 'long'") == small
        assert rows(saver.conn, "writes", "thread_id = 'long'") == set()
        assert report.threads_deleted == 1
        assert (report.threads[0].thread_id, report.bytes_freed) == ("long", size)

        report = prune_db(database, older_than_days=20, now=in_15_days)
        assert [t.thread_id for t in report.threads] == ["short"]
        assert [t.thread_id for t in list_threads(database)] == ["small"]


def test_a_thread_being_written_is_skipped(db: Path):
    age_thread(db, "short", 10)
    with open_database(db) as database:
        saver = database.saver
        everything = rows(saver.conn, "checkpoints", "thread_id IN ('long', 'short')")
        with ThreadLock(db, "long"), ThreadLock(db, "short"):
            report = prune_db(database, keep_last_turns=1, older_than_days=5)
        assert rows(saver.conn, "checkpoints", "thread_id IN ('long', 'short')") == everything
        assert [(s.thread_id, s.reason.split(":")[0]) for s in report.skipped] == [
            ("long", "busy"),
            ("short", "busy"),
        ]
        assert [t.thread_id for t in report.threads] == ["small"]
        report = prune_db(database, keep_last_turns=1, older_than_days=5)
    assert report.skipped == []
    assert {(t.thread_id, t.thread_deleted) for t in report.threads} == {
        ("long", False),
        ("short", True),
    }


def test_a_thread_with_an_unreadable_checkpoint_is_left_alone(db: Path):
    with open_database(db) as database:
        saver = database.saver
        root = min(checkpoint_ids(saver.conn, "short"))
        saver.conn.execute(
            "UPDATE checkpoints SET checkpoint = x'c1c1c1' WHERE checkpoint_id = ?", (root,)
        )
        saver.conn.commit()
        short = rows(saver.conn, "checkpoints", "thread_id = 'short'")

        report = prune_db(database, keep_last_turns=1)

        assert rows(saver.conn, "checkpoints", "thread_id = 'short'") == short
        assert [(s.thread_id, s.reason) for s in report.skipped] == [
            ("short", f"checkpoint {root} is unreadable, so nothing was pruned")
        ]
        assert {t.thread_id for t in report.threads} == {"long", "small"}


def test_a_failed_delete_leaves_the_thread_whole(db: Path):
    with open_database(db) as database:
        saver = database.saver
        everything = (rows(saver.conn, "checkpoints"), rows(saver.conn, "writes"))
        saver.conn.execute(
            "CREATE TRIGGER fail BEFORE DELETE ON writes BEGIN SELECT RAISE(ABORT, 'disk'); END"
        )
        with pytest.raises(sqlite3.IntegrityError, match="disk"):
            prune_db(database, keep_last_turns=1)
        with pytest.raises(sqlite3.IntegrityError, match="disk"):
            delete_thread(database, "long")
        assert (rows(saver.conn, "checkpoints"), rows(saver.conn, "writes")) == everything


def test_prune_needs_something_to_do():
    with pytest.raises(UsageError, match="nothing to prune"):
        prune(None, keep_last_turns=None, older_than_days=None, dry_run=True)
    with pytest.raises(UsageError, match="at least 1"):
        prune(None, keep_last_turns=0, older_than_days=None, dry_run=True)


def test_vacuum_gives_the_space_of_a_big_delete_back(db: Path):
    with open_database(db) as database:
        saver = database.saver
        graph = build_graph(saver)
        short = states(graph, "short", checkpoint_ids(saver.conn, "short"))
        delete_thread(database, "long")
        wal = db.with_name(db.name + "-wal")
        on_disk = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

        report = vacuum(database)

        assert report.bytes_before == on_disk
        assert report.bytes_after == db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        assert report.bytes_after < report.bytes_before / 2
        assert report.bytes_freed == report.bytes_before - report.bytes_after
        assert states(graph, "short", checkpoint_ids(saver.conn, "short")) == short
