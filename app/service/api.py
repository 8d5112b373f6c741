"""The thread services the front ends call: the CLI, the REPL and the HTTP server are adapters over
these (parse → service → render). Each takes an open `Database` and typed arguments and returns a
typed result; a service that writes takes the thread's lock itself, before it reads anything, so
what it read cannot change under it. Turns themselves run through `Runtime.session` (runtime.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.db import lock_thread
from app.db.base import Database
from app.errors import ConflictError, UsageError
from app.service.history import History, TurnSummary, history
from app.service.index import CheckpointIndex, CheckpointRow
from app.service.threads import thread_graph
from app.store import validate_thread_id

# `history` and `checkpoints` need no LangGraph: the services that load states import it when called.
if TYPE_CHECKING:
    from langgraph.types import StateSnapshot

    from app.service.archive import ImportReport
    from app.service.maintenance import DeleteReport
    from app.service.timetravel import RollbackReport, StateDiff
    from app.service.workspace_sync import WorkspaceReport

__all__ = ["History", "TurnSummary", "history"]  # with the services below


def checkpoints(database: Database, thread_id: str) -> CheckpointIndex:
    """Every checkpoint of the thread (ids, parents, turns, writers), read without deserialising."""
    return CheckpointIndex(database, validate_thread_id(thread_id))


@dataclass(frozen=True)
class CheckpointState:
    thread_id: str
    row: CheckpointRow
    is_head: bool
    snapshot: StateSnapshot


def checkpoint_state(database: Database, thread_id: str, ref: str | None = None) -> CheckpointState:
    """The full state at checkpoint `ref` (an id or a unique part of one; default: the head)."""
    from app.service.timetravel import state_at

    index = CheckpointIndex(database, validate_thread_id(thread_id))
    row = index.resolve(ref) if ref else index.head
    snapshot = state_at(thread_graph(database.saver, thread_id), thread_id, row.checkpoint_id)
    return CheckpointState(thread_id, row, row is index.head, snapshot)


@dataclass(frozen=True)
class Diff:
    before: CheckpointRow
    after: CheckpointRow
    changes: StateDiff


def diff(database: Database, thread_id: str, before: str, after: str) -> Diff:
    from app.service.timetravel import diff_states, state_at

    index = CheckpointIndex(database, validate_thread_id(thread_id))
    graph = thread_graph(database.saver, thread_id)
    a, b = index.resolve(before), index.resolve(after)
    changes = diff_states(
        state_at(graph, thread_id, a.checkpoint_id).values,
        state_at(graph, thread_id, b.checkpoint_id).values,
    )
    return Diff(a, b, changes)


def rollback(
    database: Database,
    thread_id: str,
    *,
    turns: int | None = None,
    checkpoint: str | None = None,
    workspace: Path | None = None,
    force: bool = False,
) -> RollbackReport:
    """Undo the last `turns` turns, or go back to `checkpoint` (exactly one of them); the files in
    `workspace` (None: leave them) follow the conversation back."""
    from app.service.timetravel import rollback_to

    if (turns is None) == (checkpoint is None):
        raise UsageError("give exactly one of --turns N or --checkpoint ID")
    with lock_thread(database.location, validate_thread_id(thread_id)):
        index = CheckpointIndex(database, thread_id)
        target = _rollback_target(index, turns, checkpoint)
        return rollback_to(
            thread_graph(database.saver, thread_id), index, target, workspace=workspace, force=force
        )


def _rollback_target(index: CheckpointIndex, turns: int | None, ref: str | None) -> CheckpointRow:
    if ref is not None:
        return index.resolve(ref)
    assert turns is not None
    current = index.head.turn or 0
    if turns >= current:
        raise UsageError(
            f"thread {index.thread_id} has {current} turn(s); roll back at most {current - 1} "
            "(to start over, use a new thread)"
        )
    return index.end_of_turn(current - turns)


@dataclass(frozen=True)
class ForkReport:
    thread_id: str
    source: CheckpointRow
    head: str
    workspace: WorkspaceReport


def fork(
    database: Database,
    thread_id: str,
    to: str,
    *,
    checkpoint: str | None = None,
    workspace: Path | None = None,
    force: bool = False,
) -> ForkReport:
    """A new thread `to` whose state is the thread's state at `checkpoint` (default: the head)."""
    from app.service.timetravel import fork_at

    validate_thread_id(thread_id)
    with lock_thread(database.location, validate_thread_id(to)):
        index = CheckpointIndex(database, thread_id)
        row = index.resolve(checkpoint) if checkpoint else index.head
        graph = thread_graph(database.saver, thread_id)
        report = fork_at(graph, index, row, to, database, workspace=workspace, force=force)
        return ForkReport(to, row, CheckpointIndex(database, to).head.checkpoint_id, report)


@dataclass(frozen=True)
class ReplayStart:
    """Where a replay starts, after the workspace was put back as it was there; `spared` are the
    files changed outside Waypoint, which the replayed calls must not write."""

    thread_id: str
    row: CheckpointRow
    snapshot: StateSnapshot
    workspace: WorkspaceReport

    @property
    def spared(self) -> list[str]:
        return self.workspace.conflicts


def prepare_replay(
    database: Database,
    thread_id: str,
    checkpoint: str,
    *,
    workspace: Path | None = None,
    force: bool = False,
    check: Callable[[StateSnapshot], None] | None = None,
) -> ReplayStart:
    """Resolve the replay's start and restore `workspace` (None: leave the files) to it. `check`
    sees the start state first and may refuse the replay (raise) before anything changes."""
    from app.service.replay import nothing_to_rerun
    from app.service.timetravel import state_at
    from app.service.workspace_sync import WorkspaceReport, restore_workspace

    with lock_thread(database.location, validate_thread_id(thread_id)):
        index = CheckpointIndex(database, thread_id)
        row = index.resolve(checkpoint)
        graph = thread_graph(database.saver, thread_id)
        start = state_at(graph, thread_id, row.checkpoint_id)
        if not start.next:
            raise nothing_to_rerun(thread_id, row.checkpoint_id)
        if check is not None:
            check(start)
        report = WorkspaceReport()
        if workspace is not None:
            head = state_at(graph, thread_id, index.head.checkpoint_id)
            report = restore_workspace(
                workspace,
                head.values.get("messages", []),
                start.values.get("messages", []),
                force=force,
            )
        return ReplayStart(thread_id, row, start, report)


def export_thread(database: Database, thread_id: str) -> dict:
    from app.service.archive import export_thread as export

    return export(database, validate_thread_id(thread_id))


def export_markdown(database: Database, thread_id: str) -> str:
    from app.service.archive import export_markdown as export

    return export(database, validate_thread_id(thread_id))


def import_thread(database: Database, data: dict, thread_id: str) -> ImportReport:
    """Write an exported thread under `thread_id` (which must not exist yet)."""
    from app.service.archive import import_thread as import_

    with lock_thread(database.location, validate_thread_id(thread_id)):
        return import_(database, data, thread_id)


def delete_thread(database: Database, thread_id: str) -> DeleteReport:
    """Remove every checkpoint and write of the thread, under its lock."""
    from app.service.maintenance import delete_thread as delete

    with lock_thread(database.location, validate_thread_id(thread_id)):
        CheckpointIndex(database, thread_id)  # a missing thread is "not found", not "0 deleted"
        return delete(database, thread_id)


def create_thread(database: Database, thread_id: str, *, if_exists: str = "raise") -> bool:
    """An empty thread (one checkpoint, no turns yet). When it exists already: `raise` a conflict,
    or `do_nothing` and return False."""
    from app.service.threads import thread_config
    from graphs.react.graph import build_graph

    with lock_thread(database.location, validate_thread_id(thread_id)):
        if database.thread_exists(thread_id):
            if if_exists == "do_nothing":
                return False
            raise ConflictError(f"thread {thread_id} already exists")
        build_graph(database.saver).update_state(
            thread_config(thread_id, metadata={"created_by": "api"}),
            {"messages": [], "turn": 0},
            as_node="finalize",
        )
    return True
