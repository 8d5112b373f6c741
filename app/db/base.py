"""The checkpoint database as Waypoint's services see it: LangGraph's saver, plus the few reads and
deletes Waypoint runs itself (listing, indexing, sizes, pruning), each written once per backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from app.db.compressed import CompressedSerializer
from app.db.crons import CronTable
from app.db.location import DatabaseLocation
from app.db.run_records import RunTable, json_object
from app.db.unreadable import UnreadableCheckpointError

if TYPE_CHECKING:  # LangGraph loads with the saver, which listing threads never needs
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "UnreadableCheckpointError",
    "checkpoint_serializer",
    "json_object",
]  # with the classes below


def checkpoint_serializer() -> CompressedSerializer:
    """Only LangGraph's safe types (messages, datetimes, …) may be revived from a checkpoint, and
    anything else is an UnreadableCheckpointError (app/db/strict.py); larger blobs are stored
    compressed (app/db/compressed.py)."""
    from app.db.strict import StrictSerializer

    return CompressedSerializer(StrictSerializer())


@dataclass(frozen=True)
class ThreadRow:
    """One thread as `threads list` shows it, read from checkpoint metadata only."""

    thread_id: str
    checkpoints: int
    last_checkpoint: str
    turns: int | None
    title: str | None

    def __post_init__(self) -> None:
        # Metadata is data anyone with the file can change: a title that is not text is shown as text.
        if self.title is not None and not isinstance(self.title, str):
            object.__setattr__(self, "title", str(self.title))


# The types of the metadata keys Waypoint reads; a value of another type (a damaged or tampered
# checkpoint) is dropped when the record is read, so every reader sees a known type or nothing.
METADATA_TYPES: dict[str, type | tuple[type, ...]] = {
    "turn": int,
    "step": int,
    "source": str,
    "preview": str,
    "rollback_from": str,
    "replay_of": str,
    "forked_from": dict,
    "closed": str,
    "compacted": int,
    "settled": str,
}


def checked_metadata(metadata: Any) -> dict[str, Any]:
    """A checkpoint's metadata with every known key of its known type (others dropped)."""
    if not isinstance(metadata, dict):
        return {}
    return {
        key: value
        for key, value in metadata.items()
        if key not in METADATA_TYPES
        or (isinstance(value, METADATA_TYPES[key]) and not isinstance(value, bool))
    }


@dataclass(frozen=True)
class CheckpointRecord:
    checkpoint_id: str
    parent_id: str | None
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Removal:
    """What deleting some checkpoints removed (or, in a dry run, would remove)."""

    checkpoints: int
    writes: int
    bytes: int


@dataclass(frozen=True)
class SpaceReport:
    bytes_before: int
    bytes_after: int
    note: str = ""


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str


@dataclass(frozen=True)
class ThreadInfo:
    """What a thread carries besides its checkpoints: the metadata a client gave it (LangGraph
    Server API), and when that record was made and last changed (ISO 8601, UTC)."""

    thread_id: str
    metadata: dict[str, Any]
    created_at: str
    updated_at: str


# Waypoint's own table of thread records (the same DDL on both backends).
THREAD_INFO_DDL = (
    "CREATE TABLE IF NOT EXISTS waypoint_threads (thread_id TEXT PRIMARY KEY, "
    "metadata TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)"
)


SAVE_THREAD_INFO = (
    "INSERT INTO waypoint_threads (thread_id, metadata, created_at, updated_at) "
    "VALUES (%s, %s, %s, %s) ON CONFLICT (thread_id) DO UPDATE SET "
    "metadata = excluded.metadata, updated_at = excluded.updated_at"
)


# (delta channels a checkpoint has a version of, those whose value it stores itself)
DeltaChannels = tuple[frozenset[str], frozenset[str]]


class StoredWrite(NamedTuple):
    """One write stored under a checkpoint, its value decoded as data (app/db/raw.py)."""

    task_path: str
    task_id: str
    idx: int
    channel: str
    value: Any


class Database(CronTable, ABC):
    """One open checkpoint database. `saver` is LangGraph's; the methods are Waypoint's own SQL
    (the crons' in app/db/crons.py).
    Only the root namespace (checkpoint_ns = '') is read, except where a method says otherwise."""

    kind: ClassVar[str]

    def __init__(self, location: DatabaseLocation) -> None:
        self.location = location

    @property
    @abstractmethod
    def saver(self) -> BaseCheckpointSaver:
        """LangGraph's saver on this database (strict reads, compressed blobs)."""

    @property
    def label(self) -> str:
        """Where the database is, safe to print (a URL's password is masked)."""
        return self.location.label

    # reads ----------------------------------------------------------------------------------------

    @abstractmethod
    def thread_rows(self) -> list[ThreadRow]:
        """Every thread, the most recently updated first."""

    @abstractmethod
    def thread_sizes(self) -> dict[str, int]:
        """Bytes stored per thread (checkpoints, metadata, writes and any channel blobs)."""

    @abstractmethod
    def thread_exists(self, thread_id: str) -> bool: ...

    @abstractmethod
    def checkpoint_records(self, thread_id: str) -> list[CheckpointRecord]:
        """The thread's checkpoints, oldest first."""

    @abstractmethod
    def writer_paths(self, thread_id: str) -> list[tuple[str, str]]:
        """Distinct (checkpoint id, task_path) of the writes stored under each checkpoint."""

    @abstractmethod
    def write_order(self, thread_id: str) -> list[tuple[str, str, str, str, int]]:
        """Every write as (checkpoint id, task id, channel, task_path, idx)."""

    @abstractmethod
    def thread_heads(self) -> list[tuple[str, str, bool]]:
        """(thread id, newest checkpoint id, has subgraph checkpoints) for every thread, by id."""

    @abstractmethod
    def delta_reader(
        self, thread_id: str, channels: Collection[str]
    ) -> Callable[[str], DeltaChannels]:
        """A function giving, per checkpoint id, which of `channels` it versions and which it
        stores a value of (where LangGraph's delta walk stops). May raise
        UnreadableCheckpointError."""

    @abstractmethod
    def stored_checkpoints(self, thread_id: str, checkpoint_ids: Collection[str]) -> dict[str, Any]:
        """These checkpoints as stored, by id, their blobs decoded as data (app/db/raw.py: nothing
        is built, the allowlist applies): channel values (every one the saver would load),
        versions and versions seen. May raise UnreadableCheckpointError."""

    @abstractmethod
    def stored_writes(
        self, thread_id: str, checkpoint_ids: Collection[str], channel: str | None = None
    ) -> dict[str, list[StoredWrite]]:
        """The writes stored under these checkpoints (to `channel`, or all), decoded as data, each
        checkpoint's in the order LangGraph replays them (task path, task id, index). May raise
        UnreadableCheckpointError."""

    @abstractmethod
    def health(self) -> Health:
        """Integrity and size, for `doctor`."""

    @abstractmethod
    def dead_writers(self) -> dict[str, str]:
        """Threads whose writer died mid-run (it left its mark and holds no lock) → that writer."""

    @property
    @abstractmethod
    def runs(self) -> RunTable:
        """The HTTP server's run records, stored next to the threads (app/db/run_records.py)."""

    @abstractmethod
    def thread_infos(self) -> dict[str, ThreadInfo]:
        """Every thread record (threads made by a client; others have none), by thread id."""

    # writes ---------------------------------------------------------------------------------------

    @abstractmethod
    def save_thread_info(self, thread_id: str, metadata: dict[str, Any], now: str) -> ThreadInfo:
        """Create or replace the thread's record (its metadata); `created_at` is kept."""

    @abstractmethod
    def forget_thread_info(self, thread_id: str) -> None:
        """Remove the thread's record and its runs' records (the thread was deleted)."""

    @abstractmethod
    def remove(self, thread_id: str, checkpoint_ids: list[str] | None, *, dry_run: bool) -> Removal:
        """Delete these checkpoints with their writes (None: the whole thread), in one transaction;
        with dry_run, only measure. The caller holds the thread's lock."""

    @abstractmethod
    def reclaim_space(self) -> SpaceReport:
        """Return freed space to the system where the backend needs to be told (`threads vacuum`)."""
