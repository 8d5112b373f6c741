"""Disk maintenance of the checkpoint database: size per thread, delete a thread, prune, vacuum.

Pruning knows `DeltaChannel`: a checkpoint without a stored value of a delta channel is rebuilt from the
writes of its ancestors back to the nearest one that stores it, so a kept checkpoint keeps that chain.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import typing
from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from langgraph.channels import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver

from app.errors import ThreadBusyError, UsageError
from app.store import ThreadLock, database_error, validate_thread_id
from app.threads import checkpoint_time
from graphs.state import AgentState

CHECKPOINT_BYTES = "IFNULL(LENGTH(checkpoint), 0) + IFNULL(LENGTH(CAST(metadata AS BLOB)), 0)"
WRITE_BYTES = "IFNULL(LENGTH(value), 0)"
# Grouping each table first walks its primary-key index in thread order (no temporary b-tree over all
# rows): ~0.5 s for 1,000 threads of 60 turns (1.6 M rows, 1.1 GB).
THREAD_SIZES_SQL = f"""
SELECT thread_id, SUM(bytes) FROM (
    SELECT thread_id, SUM({CHECKPOINT_BYTES}) AS bytes FROM checkpoints GROUP BY thread_id
    UNION ALL
    SELECT thread_id, SUM({WRITE_BYTES}) FROM writes GROUP BY thread_id
)
GROUP BY thread_id
"""
THREAD_TOTALS_SQL = f"""
SELECT (SELECT COUNT(*) FROM checkpoints WHERE thread_id = :thread),
       (SELECT COUNT(*) FROM writes WHERE thread_id = :thread),
       (SELECT IFNULL(SUM({CHECKPOINT_BYTES}), 0) FROM checkpoints WHERE thread_id = :thread)
       + (SELECT IFNULL(SUM({WRITE_BYTES}), 0) FROM writes WHERE thread_id = :thread)
"""
CHECKPOINT_ROWS_SQL = f"""
SELECT checkpoint_id, parent_checkpoint_id, CAST(metadata AS TEXT), {CHECKPOINT_BYTES}
FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''
"""
WRITES_PER_CHECKPOINT_SQL = f"""
SELECT checkpoint_id, COUNT(*), SUM({WRITE_BYTES})
FROM writes WHERE thread_id = ? AND checkpoint_ns = '' GROUP BY checkpoint_id
"""
BY_ID = "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?"


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

    @property
    def bytes_freed(self) -> int:
        return self.bytes_before - self.bytes_after

    def as_dict(self) -> dict:
        return {**asdict(self), "bytes_freed": self.bytes_freed}


def thread_sizes(connection: sqlite3.Connection) -> dict[str, int]:
    """Bytes stored per thread: checkpoint and metadata blobs plus the values of its writes."""
    return dict(connection.execute(THREAD_SIZES_SQL).fetchall())


def delete_thread(saver: SqliteSaver, thread_id: str) -> DeleteReport:
    """Remove every checkpoint and write of a thread in one transaction (the caller holds its lock)."""
    connection = saver.conn
    checkpoints, writes, size = connection.execute(
        THREAD_TOTALS_SQL, {"thread": thread_id}
    ).fetchone()
    if not checkpoints and not writes:
        raise UsageError(f"thread {thread_id} does not exist; see `threads list`")
    try:
        with _one_transaction(saver):
            checkpoints = connection.execute(
                "DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,)
            ).rowcount
            writes = connection.execute(
                "DELETE FROM writes WHERE thread_id = ?", (thread_id,)
            ).rowcount
    except sqlite3.OperationalError as exc:
        raise database_error(_database_path(connection), exc) from exc
    return DeleteReport(thread_id, checkpoints, writes, size)


def prune(
    saver: SqliteSaver,
    *,
    db_path: Path,
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
    threads = saver.conn.execute(
        "SELECT thread_id, MAX(checkpoint_id), MAX(checkpoint_ns != '') FROM checkpoints "
        "GROUP BY thread_id ORDER BY thread_id"
    ).fetchall()
    for thread_id, last_checkpoint, has_subgraphs in threads:
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
            with _try_lock(db_path, thread_id):
                if not expired and keep_last_turns is not None:
                    if has_subgraphs:
                        raise _Skip("it has subgraph checkpoints, which pruning does not handle")
                    plan = _PrunePlan(saver, thread_id, keep_last_turns, delta_channels)
                    result = plan.execute(dry_run)
                else:
                    result = _delete_whole_thread(saver, thread_id, dry_run)
        except (_Skip, UsageError) as skip:  # UsageError: another process deleted it meanwhile
            report.skipped.append(SkippedThread(thread_id, str(skip)))
            continue
        except sqlite3.OperationalError as exc:
            raise database_error(db_path, exc) from exc
        if result.checkpoints_deleted or result.writes_deleted:
            report.threads.append(result)
    return report


def vacuum(db_path: Path, connection: sqlite3.Connection) -> VacuumReport:
    """Fold the WAL into the database and rebuild the file so that freed pages return to the disk."""
    before = _file_bytes(db_path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM")
        # In WAL mode VACUUM writes the rebuilt pages to the WAL; fold them in so the file shrinks now.
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError as exc:
        raise database_error(db_path, exc) from exc
    return VacuumReport(before, _file_bytes(db_path))


class _Skip(Exception):
    """A thread prune leaves alone; the message is the note shown for it."""


@contextlib.contextmanager
def _try_lock(db_path: Path, thread_id: str) -> Iterator[None]:
    try:
        lock = ThreadLock(db_path, thread_id).__enter__()
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
        saver: SqliteSaver,
        thread_id: str,
        keep_last_turns: int,
        delta_channels: Collection[str],
    ) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.parent: dict[str, str | None] = {}
        self.turn: dict[str, int | None] = {}
        self.size: dict[str, int] = {}
        channels = set(delta_channels)
        for cid, parent, meta, size in saver.conn.execute(CHECKPOINT_ROWS_SQL, (thread_id,)):
            metadata = _json_object(meta)
            turn = metadata.get("turn")
            self.parent[cid], self.size[cid] = parent, size
            self.turn[cid] = turn if isinstance(turn, int) else None
            # LangGraph counts updates per delta channel here, so this names every delta channel.
            counters = metadata.get("counters_since_delta_snapshot")
            channels.update(counters if isinstance(counters, dict) else ())
        self.delta_channels = frozenset(channels)
        self._channels: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        kept = self._kept(keep_last_turns) if self.parent else []
        self.doomed = sorted(set(self.parent) - self._with_what_they_need(kept))

    def execute(self, dry_run: bool) -> ThreadPrune:
        connection = self.saver.conn
        writes = {
            cid: (count, size)
            for cid, count, size in connection.execute(WRITES_PER_CHECKPOINT_SQL, (self.thread_id,))
        }
        checkpoints = len(self.doomed)
        write_count = sum(writes.get(cid, (0, 0))[0] for cid in self.doomed)
        size = sum(self.size[cid] + writes.get(cid, (0, 0))[1] for cid in self.doomed)
        if self.doomed and not dry_run:
            params = [(self.thread_id, cid) for cid in self.doomed]
            with _one_transaction(self.saver):
                checkpoints = connection.executemany(
                    f"DELETE FROM checkpoints {BY_ID}", params
                ).rowcount
                write_count = connection.executemany(f"DELETE FROM writes {BY_ID}", params).rowcount
        return ThreadPrune(self.thread_id, checkpoints, write_count, size)

    def _kept(self, keep_last_turns: int) -> list[str]:
        head = max(self.parent)  # SqliteSaver's head: the greatest id
        branch, seen = [], set()
        current: str | None = head
        while current in self.parent and current not in seen:
            branch.append(current)
            seen.add(current)
            current = self.parent[current]
        turns = {self.turn[cid] for cid in branch} - {None}
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
        """(delta channels this checkpoint has a version of, those whose value its blob stores)."""
        if cid not in self._channels:
            type_tag, blob = self.saver.conn.execute(
                f"SELECT type, checkpoint FROM checkpoints {BY_ID}", (self.thread_id, cid)
            ).fetchone()
            try:
                checkpoint = self.saver.serde.loads_typed((type_tag, blob))
                versioned = frozenset(checkpoint["channel_versions"]) & self.delta_channels
                # A `_DeltaSnapshot` (or a pre-delta plain value) ends the walk, as in LangGraph.
                stored = frozenset(checkpoint["channel_values"]) & self.delta_channels
            except (ValueError, TypeError, KeyError) as exc:
                raise _Skip(f"checkpoint {cid} is unreadable, so nothing was pruned") from exc
            self._channels[cid] = (versioned, stored)
        return self._channels[cid]


def _delete_whole_thread(saver: SqliteSaver, thread_id: str, dry_run: bool) -> ThreadPrune:
    if dry_run:
        checkpoints, writes, size = saver.conn.execute(
            THREAD_TOTALS_SQL, {"thread": thread_id}
        ).fetchone()
        return ThreadPrune(thread_id, checkpoints, writes, size, thread_deleted=True)
    deleted = delete_thread(saver, thread_id)
    return ThreadPrune(
        thread_id, deleted.checkpoints, deleted.writes, deleted.bytes_freed, thread_deleted=True
    )


@contextlib.contextmanager
def _one_transaction(saver: SqliteSaver) -> Iterator[None]:
    """Take the database write lock now (BEGIN IMMEDIATE) and commit everything or nothing."""
    with saver.lock:
        saver.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            saver.conn.rollback()
            raise
        saver.conn.commit()


def _json_object(text: str | None) -> dict:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _file_bytes(db_path: Path) -> int:
    paths = (db_path, db_path.with_name(db_path.name + "-wal"))
    return sum(path.stat().st_size for path in paths if path.exists())


def _database_path(connection: sqlite3.Connection) -> Path:
    rows = connection.execute("PRAGMA database_list").fetchall()
    return Path(next((file for _, name, file in rows if name == "main"), "") or ":memory:")
