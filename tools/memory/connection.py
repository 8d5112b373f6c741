"""The SQLite connection a MemoryStore runs on: a private (0600) file, autocommit, WAL, and a busy
timeout that also covers switching a new file to WAL."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path


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
        _use_wal(connection, busy_timeout)
        connection.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        connection.close()
        raise
    return connection


def _use_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch a new database to WAL. The switch needs an exclusive lock and SQLite does not wait
    for it (no busy handler), so processes opening a new file together retry until the timeout."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)
