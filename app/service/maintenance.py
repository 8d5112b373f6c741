"""Disk maintenance of the checkpoint database: size per thread, delete a thread, prune, vacuum.

Pruning knows `DeltaChannel`: a checkpoint without a stored value of a delta channel is rebuilt from the
writes of its ancestors back to the nearest one that stores it, so a kept checkpoint keeps that chain.
"""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from langgraph.channels import DeltaChannel

from app.db import lock_thread
from app.db.base import Database, Removal, UnreadableCheckpointError
from app.errors import ThreadBusyError, UsageError
from app.service.threads import checkpoint_time
from app.store import validate_thread_id
from graphs.state import AgentState


def _delta_fields(schema: type) -> frozenset[str]:
    hints = typing.get_type_hints(schema, include_extras=True)
    return frozenset(
        name
        for name, hint in hints.items()
        if any(isinstance(extra, DeltaChannel) for extra in getattr(hint, "__metadata__", ()))
    )


DELTA_CHANNELS = _delta_fields(AgentState)


@dataclass(frozen=True)
class DeleteReport:
    thread_id: str
    checkpoints: int
    writes: int
    bytes_freed: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ThreadPrune:
    """What pruning removed (in a dry run: would remove) from one thread."""

    thread_id: str
    checkpoints_deleted: int
    writes_deleted: int
    bytes_freed: int
    thread_deleted: bool = False


@dataclass(frozen=True)
class SkippedThread:
    thread_id: str
    reason: str


@dataclass
class PruneReport:
    """Threads with something deleted (or to delete), threads left alone and why, and totals."""

    dry_run: bool
    threads_examined: int = 0
    threads: list[ThreadPrune] = field(default_factory=list)
    skipped: list[SkippedThread] = field(default_factory=list)

    @property
    def checkpoints_deleted(self) -> int:
        return sum(t.checkpoints_deleted for t in self.threads)

    @property
    def writes_deleted(self) -> int:
        return sum(t.writes_deleted for t in self.threads)

    @property
    def bytes_freed(self) -> int:
        return sum(t.bytes_freed for t in self.threads)

    @property
    def threads_deleted(self) -> int:
        return sum(t.thread_deleted for t in self.threads)

    def as_dict(self) -> dict:
        totals = ("checkpoints_deleted", "writes_deleted", "bytes_freed", "threads_deleted")
        return {**asdict(self), **{name: getattr(self, name) for name in totals}}


@dataclass(frozen=True)
class VacuumReport:
    bytes_before: int
    bytes_after: int
    note: str = ""

    @property
    def bytes_freed(self) -> int:
        return self.bytes_before - self.bytes_after

    def as_dict(self) -> dict:
        return {**asdict(self), "bytes_freed": self.bytes_freed}


def thread_sizes(database: Database) -> dict[str, int]:
    """Bytes stored per thread: checkpoints and metadata, the values of its writes, any blobs."""
    return database.thread_sizes()


def delete_thread(database: Database, thread_id: str) -> DeleteReport:
    """Remove every checkpoint and write of a thread in one transaction (the caller holds its lock:
    app.service.api.delete_thread takes it)."""
    removal = database.remove(thread_id, None, dry_run=False)
    if not removal.checkpoints and not removal.writes:
        raise UsageError(
            f"thread {thread_id} does not exist; list them with: waypoint threads list"
        )
    return DeleteReport(thread_id, removal.checkpoints, removal.writes, removal.bytes)


def prune(
    database: Database,
    *,
    keep_last_turns: int | None,
    older_than_days: float | None,
    dry_run: bool,
    now: datetime | None = None,
    delta_channels: Collection[str] = DELTA_CHANNELS,
) -> PruneReport:
    """Delete threads idle for more than `older_than_days`; in every other thread, delete each
    checkpoint that neither the last `keep_last_turns` turns of its current branch nor their
    rebuilding needs. One transaction per thread; a thread another process is writing is skipped.
    """
    if keep_last_turns is None and older_than_days is None:
        raise UsageError("nothing to prune: give --keep-last-turns N and/or --older-than DAYS")
    if keep_last_turns is not None and keep_last_turns < 1:
        raise UsageError(f"--keep-last-turns must be at least 1 (got {keep_last_turns})")
    if older_than_days is not None and older_than_days < 0:
        raise UsageError(f"--older-than must be zero or more days (got {older_than_days})")
    now = (now or datetime.now(UTC)).astimezone()
    max_idle = None if older_than_days is None else timedelta(days=older_than_days)
    report = PruneReport(dry_run=dry_run)
    for thread_id, last_checkpoint, has_subgraphs in database.thread_heads():
        report.threads_examined += 1
        try:
            validate_thread_id(thread_id)
            idle = now - datetime.fromisoformat(checkpoint_time(last_checkpoint))
        except (UsageError, ValueError):
            report.skipped.append(SkippedThread(thread_id, "its id or checkpoint ids are invalid"))
            continue
        expired = max_idle is not None and idle > max_idle
        if not expired and keep_last_turns is None:
            continue
        try:
            with _try_lock(database, thread_id):
                if not expired and keep_last_turns is not None:
                    if has_subgraphs:
                        raise _Skip("it has subgraph checkpoints, which pruning does not handle")
                    plan = _PrunePlan(database, thread_id, keep_last_turns, delta_channels)
                    result = plan.execute(dry_run)
                else:
                    result = _delete_whole_thread(database, thread_id, dry_run)
        except (_Skip, UsageError) as skip:  # UsageError: another process deleted it meanwhile
            report.skipped.append(SkippedThread(thread_id, str(skip)))
            continue
        if result.checkpoints_deleted or result.writes_deleted:
            report.threads.append(result)
    return report


def vacuum(database: Database) -> VacuumReport:
    """Give freed space back: SQLite folds the WAL in and rebuilds the file; PostgreSQL VACUUMs."""
    space = database.reclaim_space()
    return VacuumReport(space.bytes_before, space.bytes_after, space.note)


class _Skip(Exception):
    """A thread prune leaves alone; the message is the note shown for it."""


@contextlib.contextmanager
def _try_lock(database: Database, thread_id: str) -> Iterator[None]:
    lock = lock_thread(database.location, thread_id)
    try:
        lock.__enter__()
    except ThreadBusyError:
        raise _Skip("busy: another Waypoint process is writing to it") from None
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


class _PrunePlan:
    """The checkpoints of one thread (root namespace) that prune keeps, and the rest it deletes.

    Kept: the current branch from the oldest checkpoint of its last N turns up to the head. Needed:
    what rebuilding a kept or needed checkpoint reads, which is (LangGraph's delta walk) its parent
    chain back to the nearest ancestor storing a value of each delta channel it lacks. The walk stops
    silently at a missing parent and rebuilds from whatever it found, so dropping one needed ancestor
    would give wrong messages rather than an error.
    """

    def __init__(
        self,
        database: Database,
        thread_id: str,
        keep_last_turns: int,
        delta_channels: Collection[str],
    ) -> None:
        self.database = database
        self.thread_id = thread_id
        self.parent: dict[str, str | None] = {}
        self.turn: dict[str, int | None] = {}
        channels = set(delta_channels)
        for record in database.checkpoint_records(thread_id):
            cid, turn = record.checkpoint_id, record.metadata.get("turn")
            self.parent[cid] = record.parent_id
            self.turn[cid] = turn if isinstance(turn, int) else None
            # LangGraph counts updates per delta channel here, so this names every delta channel.
            counters = record.metadata.get("counters_since_delta_snapshot")
            channels.update(counters if isinstance(counters, dict) else ())
        self.delta_channels = frozenset(channels)
        self._read_channels = database.delta_reader(thread_id, self.delta_channels)
        self._channels: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        kept = self._kept(keep_last_turns) if self.parent else []
        self.doomed = sorted(set(self.parent) - self._with_what_they_need(kept))

    def execute(self, dry_run: bool) -> ThreadPrune:
        if not self.doomed:
            return ThreadPrune(self.thread_id, 0, 0, 0)
        removal = self.database.remove(self.thread_id, self.doomed, dry_run=dry_run)
        return ThreadPrune(self.thread_id, removal.checkpoints, removal.writes, removal.bytes)

    def _kept(self, keep_last_turns: int) -> list[str]:
        head = max(self.parent)  # SqliteSaver's head: the greatest id
        branch, seen = [], set()
        current: str | None = head
        while current in self.parent and current not in seen:
            branch.append(current)
            seen.add(current)
            current = self.parent[current]
        turns = {turn for cid in branch if (turn := self.turn[cid]) is not None}
        last_turns = set(sorted(turns, reverse=True)[:keep_last_turns])
        # Turnless checkpoints inside the kept range (a rollback's copy) stay, so history has no hole.
        oldest = max((i for i, cid in enumerate(branch) if self.turn[cid] in last_turns), default=0)
        return branch[: oldest + 1]

    def _with_what_they_need(self, kept: list[str]) -> set[str]:
        needed, todo = set(kept), list(kept)
        while todo:
            for ancestor in self._ancestors_read(todo.pop()):
                if ancestor not in needed:
                    needed.add(ancestor)
                    todo.append(ancestor)
        return needed

    def _ancestors_read(self, cid: str) -> list[str]:
        """The ancestors LangGraph reads to rebuild `cid`'s delta channels, nearest first."""
        versioned, stored = self._delta_channels_of(cid)
        missing = versioned - stored
        chain: list[str] = []
        seen = {cid}
        current = self.parent[cid]
        while missing and current in self.parent and current not in seen:
            chain.append(current)
            seen.add(current)
            missing -= self._delta_channels_of(current)[1]
            current = self.parent[current]
        return chain

    def _delta_channels_of(self, cid: str) -> tuple[frozenset[str], frozenset[str]]:
        """(delta channels this checkpoint has a version of, those whose value it stores)."""
        if cid not in self._channels:
            try:
                self._channels[cid] = self._read_channels(cid)
            except UnreadableCheckpointError as exc:
                raise _Skip(f"checkpoint {cid} is unreadable, so nothing was pruned") from exc
        return self._channels[cid]


def _delete_whole_thread(database: Database, thread_id: str, dry_run: bool) -> ThreadPrune:
    removal: Removal = database.remove(thread_id, None, dry_run=dry_run)
    if not removal.checkpoints and not removal.writes:
        raise UsageError(
            f"thread {thread_id} does not exist; list them with: waypoint threads list"
        )
    return ThreadPrune(
        thread_id, removal.checkpoints, removal.writes, removal.bytes, thread_deleted=True
    )
