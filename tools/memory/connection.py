"""The SQLite connection a MemoryStore runs on: a private (0600) file, autocommit, WAL (switched on
with tools.sqlite_wal, which waits for the lock) and a busy timeout; and LangGraph's SqliteStore on
it, imported and set up."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tools.sqlite_wal import use_wal

if TYPE_CHECKING:
    from langgraph.store.sqlite import SqliteStore


def connect(path: Path, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """A connection for a MemoryStore: autocommit (SqliteStore opens its own transactions),
    shareable across threads, WAL, waiting up to busy_timeout seconds for other writers.
    A new file is created private (0600), like the checkpoint database it usually is."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    connection = sqlite3.connect(
        path, timeout=busy_timeout, check_same_thread=False, isolation_level=None
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        use_wal(connection, busy_timeout)
        connection.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        connection.close()
        raise
    return connection


def sqlite_store_class() -> type[SqliteStore]:
    """LangGraph's SqliteStore, imported without numpy: its module imports `sqlite_vec` for vector
    search, which Waypoint's memory does not use, and `sqlite_vec` imports numpy only to offer a
    numpy helper (~140 ms of every turn's start-up). numpy is hidden while it is imported, unless
    something already loaded it."""
    hide = "numpy" not in sys.modules
    if hide:
        sys.modules["numpy"] = None  # type: ignore[assignment]  # None makes `import numpy` raise ImportError
    try:
        from langgraph.store.sqlite import SqliteStore
    finally:
        if hide:
            del sys.modules["numpy"]
    return SqliteStore


def setup_sqlite_store(store: SqliteStore, attempts: int = 5) -> None:
    """Run the store's migrations. Two processes opening a new database at once can both try the
    same migration; the loser sees a duplicate and simply re-reads the version and carries on."""
    for attempt in range(attempts):
        try:
            store.setup()
            return
        except (sqlite3.IntegrityError, sqlite3.OperationalError) as exc:
            raced = isinstance(exc, sqlite3.IntegrityError) or "duplicate column" in str(exc)
            if not raced or attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
