"""Switching a SQLite connection to WAL, for every SQLite file Waypoint opens (checkpoints, memory,
the document index): the switch needs an exclusive lock and SQLite does not wait for it (no busy
handler), so processes opening a new file together retry until the busy timeout."""

from __future__ import annotations

import sqlite3
import time


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
