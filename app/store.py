"""Open the checkpoint database (SQLite or PostgreSQL, strict deserialisation), validate thread ids
and lock threads for writing. The backends live in `app.db`; this is the one import for callers."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver

from app.db import (
    DbRef,
    as_location,
    database_of,
    lock_thread,
    open_database,
    thread_interrupted,
)
from app.db.base import Database, strict_serializer
from app.db.sqlite import connect, database_error
from app.db.sqlite_lock import ThreadLock, dead_writer, lock_path
from app.errors import UsageError

THREAD_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

__all__ = [
    "THREAD_ID",
    "Database",
    "DbRef",
    "ThreadLock",
    "as_location",
    "connect",
    "database_error",
    "database_of",
    "dead_writer",
    "lock_path",
    "lock_thread",
    "open_checkpointer",
    "open_database",
    "strict_serializer",
    "thread_interrupted",
    "validate_thread_id",
]


def validate_thread_id(thread_id: str) -> str:
    if not THREAD_ID.fullmatch(thread_id or "") or thread_id in {".", ".."}:
        raise UsageError(
            f"invalid thread id {thread_id[:80]!r}: use 1-64 letters, digits, '.', '_' or '-' "
            "(for example --thread demo)"
        )
    return thread_id


@contextlib.contextmanager
def open_checkpointer(db: DbRef | Path, busy_timeout: float = 5.0) -> Iterator[BaseCheckpointSaver]:
    """Just the saver of `open_database(db)`, for callers that need nothing else."""
    with open_database(db, busy_timeout) as database:
        yield database.saver
