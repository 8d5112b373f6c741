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
from app.db.base import Database, ThreadInfo, ThreadRow
from app.errors import ConflictError, ThreadNotFoundError, UsageError
from app.service.history import history
from app.service.index import CheckpointIndex, CheckpointRow
from app.service.threads import checkpoint_time, load_state, reading, thread_config, thread_graph
from app.store import validate_thread_id
from app.text import plural

# `history`, `checkpoints` and the thread records need no LangGraph: the services that load states
# import it when called.
if TYPE_CHECKING:
    from langchain_core.messages import ToolCall
    from langgraph.types import StateSnapshot

    from app.service.archive import ImportReport
    from app.service.maintenance import DeleteReport
    from app.service.timetravel import RollbackReport, StateDiff
    from app.service.workspace_sync import WorkspaceReport
    from graphs.shared.skeleton import StrategyGraph

__all__ = ["history"]  # the `history` service is written in app/service/history.py


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


def undo_run(database: Database, thread_id: str, run_id: str) -> int:
    """LangGraph's rollback of a cancelled run: delete the checkpoints it wrote (those whose
    metadata names it) and every later one, so the head is again what it was before the run.
    Returns how many were deleted."""
    with lock_thread(database.location, validate_thread_id(thread_id)):
        records = database.checkpoint_records(thread_id)
        written = [r.checkpoint_id for r in records if r.metadata.get("run_id") == run_id]
        if not written:
            return 0
        first = min(written)  # checkpoint ids are time-ordered
        doomed = [r.checkpoint_id for r in records if r.checkpoint_id >= first]
        database.remove(thread_id, doomed, dry_run=False)
        return len(doomed)


def _rollback_target(index: CheckpointIndex, turns: int | None, ref: str | None) -> CheckpointRow:
    if ref is not None:
        return index.resolve(ref)
    assert turns is not None
    current = index.head.turn or 0
    if turns >= current:
        most = (
            f"roll back at most {plural(current - 1, 'turn')}"
            if current > 1
            else "there is no earlier turn to go back to"
        )
        raise UsageError(
            f"thread {index.thread_id} has {plural(current, 'turn')}; {most} "
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
    check: Callable[[StateSnapshot, list[ToolCall]], None] | None = None,
) -> ReplayStart:
    """Resolve the replay's start and restore `workspace` (None: leave the files) to it. `check`
    sees the start state and the tool calls the original turn made from there first, and may
    refuse the replay (raise) before anything changes."""
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
            check(start, _calls_ahead(index, graph, row, start))
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


def _calls_ahead(
    index: CheckpointIndex, graph: StrategyGraph, row: CheckpointRow, start: StateSnapshot
) -> list[ToolCall]:
    """The tool calls the turn made after `row` the first time (those a replay would meet again
    if the model decides the same): the open ones at `row`, then those of the newest checkpoint
    of the same turn that descends from it."""
    from langchain_core.messages import HumanMessage

    from app.service.timetravel import state_at
    from graphs.shared.messages import dangling_tool_calls

    known = start.values.get("messages", [])
    calls = dangling_tool_calls(known)
    descendants = _descendants(index, row.checkpoint_id)
    later = [r for r in index.rows if r.checkpoint_id in descendants and r.turn == row.turn]
    if later:
        end = state_at(graph, index.thread_id, later[-1].checkpoint_id)
        for message in end.values.get("messages", [])[len(known) :]:
            if isinstance(message, HumanMessage):
                break
            calls.extend(getattr(message, "tool_calls", []) or [])
    return calls


def _descendants(index: CheckpointIndex, checkpoint_id: str) -> set[str]:
    children = index.children()
    found: set[str] = set()
    frontier = [checkpoint_id]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child.checkpoint_id not in found:
                found.add(child.checkpoint_id)
                frontier.append(child.checkpoint_id)
    return found


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
    """Remove every checkpoint and write of the thread, its record and its crons, under its lock."""
    from app.service.maintenance import DeleteReport
    from app.service.maintenance import delete_thread as delete

    with lock_thread(database.location, validate_thread_id(thread_id)):
        recorded = thread_id in database.thread_infos()
        if not database.thread_exists(thread_id):
            if not recorded:
                raise ThreadNotFoundError(thread_id)
            database.forget_thread_info(thread_id)
            database.delete_thread_crons(thread_id)
            return DeleteReport(thread_id, 0, 0, 0)
        report = delete(database, thread_id)
        database.forget_thread_info(thread_id)
        database.delete_thread_crons(thread_id)
        return report


@dataclass(frozen=True)
class ThreadView:
    """A thread as a LangGraph client sees it: its metadata and when it was made and changed.
    A thread exists once it has a record (made by a client) or a checkpoint (made by a turn)."""

    thread_id: str
    metadata: dict
    created_at: str
    updated_at: str


def thread_views(database: Database) -> list[ThreadView]:
    """Every thread, the most recently changed first."""
    infos = database.thread_infos()
    views = {row.thread_id: _view(row.thread_id, infos, row) for row in database.thread_rows()}
    for thread_id in infos.keys() - views.keys():
        views[thread_id] = _view(thread_id, infos, None)
    return sorted(views.values(), key=lambda v: v.updated_at, reverse=True)


def thread_view(database: Database, thread_id: str) -> ThreadView:
    validate_thread_id(thread_id)
    infos = database.thread_infos()
    if not database.thread_exists(thread_id):
        if thread_id not in infos:
            raise ThreadNotFoundError(thread_id)
        return _view(thread_id, infos, None)
    index = CheckpointIndex(database, thread_id)
    first, head = index.rows[0], index.head
    return _view(thread_id, infos, None, first.created_at, head.created_at)


def _view(
    thread_id: str,
    infos: dict[str, ThreadInfo],
    row: ThreadRow | None,
    first: str | None = None,
    last: str | None = None,
) -> ThreadView:
    info = infos.get(thread_id)
    last = last or (checkpoint_time(row.last_checkpoint) if row else None)
    created = info.created_at if info else (first or last or "")
    updated = max(filter(None, [last, info.updated_at if info else None]), default=created)
    return ThreadView(thread_id, dict(info.metadata) if info else {}, created, updated)


def create_thread(
    database: Database,
    thread_id: str,
    *,
    metadata: dict | None = None,
    if_exists: str = "raise",
) -> tuple[ThreadView, bool]:
    """A new thread with `metadata` and no turns yet (True), or, with `if_exists="do_nothing"`,
    the existing one unchanged (False); `raise`: an existing thread is a conflict."""
    with lock_thread(database.location, validate_thread_id(thread_id)):
        if database.thread_exists(thread_id) or thread_id in database.thread_infos():
            if if_exists == "do_nothing":
                return thread_view(database, thread_id), False
            raise ConflictError(f"thread {thread_id} already exists")
        database.save_thread_info(thread_id, metadata or {}, _now())
    return thread_view(database, thread_id), True


def update_thread_metadata(database: Database, thread_id: str, metadata: dict) -> ThreadView:
    """Merge `metadata` into the thread's (a key set to None is removed)."""
    with lock_thread(database.location, validate_thread_id(thread_id)):
        current = thread_view(database, thread_id).metadata
        merged = {k: v for k, v in {**current, **metadata}.items() if v is not None}
        database.save_thread_info(thread_id, merged, _now())
    return thread_view(database, thread_id)


def copy_thread(database: Database, thread_id: str, new_id: str) -> ThreadView:
    """A new thread `new_id` with every checkpoint of `thread_id` (its whole history) and its
    metadata."""
    from app.service.archive import export_thread as export
    from app.service.archive import import_thread as import_

    source = thread_view(database, thread_id)
    with lock_thread(database.location, validate_thread_id(new_id)):
        if database.thread_exists(new_id) or new_id in database.thread_infos():
            raise ConflictError(f"thread {new_id} already exists")
        if database.thread_exists(thread_id):
            import_(database, export(database, thread_id), new_id)
        database.save_thread_info(new_id, source.metadata, _now())
    return thread_view(database, new_id)


def update_state(
    database: Database,
    thread_id: str,
    values: dict | None,
    *,
    as_node: str | None = None,
    checkpoint_id: str | None = None,
) -> str:
    """Write `values` to the thread as if `as_node` had (LangGraph's update_state), on top of
    the head or of `checkpoint_id` (a new branch from there); returns the new checkpoint's id."""
    from langgraph.errors import InvalidUpdateError

    with lock_thread(database.location, validate_thread_id(thread_id)):
        graph = thread_graph(database.saver, thread_id)
        if checkpoint_id is not None:
            checkpoint_id = (
                CheckpointIndex(database, thread_id).resolve(checkpoint_id).checkpoint_id
            )
        config = thread_config(thread_id, checkpoint_id, metadata={"updated_by": "api"})
        try:
            written = graph.update_state(config, values, as_node=as_node)
        except (InvalidUpdateError, ValueError, KeyError) as exc:
            raise UsageError(f"the state update was refused: {exc}") from None
        return written["configurable"]["checkpoint_id"]


def state_history(
    database: Database,
    thread_id: str,
    *,
    limit: int = 10,
    before: str | None = None,
    metadata: dict | None = None,
) -> list[StateSnapshot]:
    """The thread's states, newest first (every branch), at most `limit`, older than `before`."""
    validate_thread_id(thread_id)
    if not database.thread_exists(thread_id):
        thread_view(database, thread_id)  # a recorded thread with no turns has no history yet
        return []
    graph = thread_graph(database.saver, thread_id)
    before_config = thread_config(thread_id, before) if before else None
    with reading(thread_id, "in history"):
        return list(
            graph.get_state_history(
                thread_config(thread_id), filter=metadata, before=before_config, limit=limit
            )
        )


def head_state(
    database: Database, thread_id: str, checkpoint_id: str | None = None
) -> StateSnapshot | None:
    """The thread's state at its head (or at `checkpoint_id`); None for a thread with no turns."""
    validate_thread_id(thread_id)
    if not database.thread_exists(thread_id):
        thread_view(database, thread_id)
        return None
    from app.service.timetravel import state_at

    graph = thread_graph(database.saver, thread_id)
    if checkpoint_id is None:
        return load_state(graph, thread_id)
    row = CheckpointIndex(database, thread_id).resolve(checkpoint_id)
    return state_at(graph, thread_id, row.checkpoint_id)


def _now() -> str:
    from datetime import UTC

    from tools.clock import now

    return now().astimezone(UTC).isoformat()
