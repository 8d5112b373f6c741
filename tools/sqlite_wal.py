"""What every SQLite file Waypoint opens (checkpoints, memory, the document index) shares: the
switch to WAL, which needs an exclusive lock SQLite does not wait for (no busy handler), so processes
opening a new file together retry until the busy timeout; and the write transaction of an
autocommit connection."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager


def use_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


@contextmanager
def write_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """Take the write lock now (BEGIN IMMEDIATE) and commit everything or nothing."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
