"""The server's one door to the database and the thread locks: the same functions the CLI uses.

Every route opens the checkpoint database, indexes a thread or takes a thread's write lock through
this module, so the storage back end (SQLite or PostgreSQL, `app/db/`) is chosen in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from langgraph.checkpoint.base import BaseCheckpointSaver

from app.config import Settings
from app.maintenance import DeleteReport, delete_thread
from app.memory import open_memory
from app.store import database_of, lock_thread, open_checkpointer, thread_interrupted
from app.threads import ThreadSummary, list_threads, thread_exists
from app.timetravel import CheckpointIndex
from app.timetravel import fork as fork_thread
from app.workspace_sync import WorkspaceReport
from tools.memory import MemoryStore


@contextlib.contextmanager
def open_saver(settings: Settings) -> Iterator[BaseCheckpointSaver]:
    with open_checkpointer(settings.db, settings.busy_timeout) as saver:
        yield saver


@contextlib.contextmanager
def open_user_memory(settings: Settings) -> Iterator[MemoryStore]:
    with open_memory(settings) as memory:
        yield memory


def write_lock(settings: Settings, thread_id: str) -> contextlib.AbstractContextManager[object]:
    """The thread's exclusive write lock (raises ThreadBusyError when another writer holds it)."""
    return lock_thread(settings.db, thread_id)


def exists(saver: BaseCheckpointSaver, thread_id: str) -> bool:
    return thread_exists(database_of(saver), thread_id)


def index(saver: BaseCheckpointSaver, thread_id: str) -> CheckpointIndex:
    """The thread's checkpoints; a UsageError when the thread does not exist."""
    return CheckpointIndex(database_of(saver), thread_id)


def threads(saver: BaseCheckpointSaver, settings: Settings) -> list[ThreadSummary]:
    return list_threads(database_of(saver))


def interrupted(settings: Settings, thread_id: str) -> bool:
    """A writer died mid-run on this thread (until its next turn closes it)."""
    return thread_interrupted(settings.db, thread_id)


def delete(saver: BaseCheckpointSaver, thread_id: str) -> DeleteReport:
    return delete_thread(database_of(saver), thread_id)


def fork(saver, graph, source_index, row, new_thread_id, **options) -> WorkspaceReport:  # type: ignore[no-untyped-def]
    return fork_thread(graph, source_index, row, new_thread_id, database_of(saver), **options)
