"""The SQLite connection a MemoryStore runs on: a private (0600) file, autocommit, WAL (switched on
with tools.sqlite_wal, which waits for the lock) and a busy timeout."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from tools.sqlite_wal import use_wal


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
