"""Per-thread write locks for a PostgreSQL database: a session advisory lock on a dedicated
connection (the server releases it when the holder's connection dies, on any machine), and a row in
`waypoint_thread_writers` naming the holder (pid@host) until it exits cleanly."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from typing import TYPE_CHECKING

from app.db.location import DatabaseLocation
from app.db.pg_connect import connect
from app.db.sqlite_lock import busy_error

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import DictRow

WRITERS_DDL = """
CREATE TABLE IF NOT EXISTS waypoint_thread_writers (
    thread_id TEXT PRIMARY KEY,
    lock_key BIGINT NOT NULL,
    holder TEXT NOT NULL,
    since TIMESTAMPTZ NOT NULL DEFAULT now()
)"""
MARK_SQL = """
INSERT INTO waypoint_thread_writers (thread_id, lock_key, holder) VALUES (%s, %s, %s)
ON CONFLICT (thread_id) DO UPDATE SET lock_key = EXCLUDED.lock_key, holder = EXCLUDED.holder,
    since = now()"""
# A mark whose advisory lock nobody holds: its writer's connection died mid-run. The 64-bit key
# shows in pg_locks as classid (high 32 bits) and objid (low 32 bits), objsubid 1.
DEAD_WRITERS_SQL = """
SELECT w.thread_id, w.holder FROM waypoint_thread_writers AS w
WHERE NOT EXISTS (
    SELECT 1 FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = ((w.lock_key >> 32) & 4294967295)::oid
      AND l.objid = (w.lock_key & 4294967295)::oid
)"""


def lock_key(thread_id: str) -> int:
    """A stable signed 64-bit key per thread id (pg_advisory_lock takes a bigint)."""
    digest = hashlib.sha256(f"waypoint-thread\x00{thread_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def ensure_writers_table(conn: psycopg.Connection[DictRow]) -> None:
    import psycopg

    # Two processes creating it at the same moment: the loser's duplicate is harmless.
    with contextlib.suppress(psycopg.errors.UniqueViolation):
        conn.execute(WRITERS_DDL)


def dead_writers(conn: psycopg.Connection[DictRow]) -> dict[str, str]:
    ensure_writers_table(conn)
    return {row["thread_id"]: row["holder"] for row in conn.execute(DEAD_WRITERS_SQL)}


class AdvisoryLock:
    """An exclusive write lock per thread, held by a connection of its own for its lifetime."""

    def __init__(self, location: DatabaseLocation, thread_id: str) -> None:
        self.location = location
        self.thread_id = thread_id
        self.key = lock_key(thread_id)
        self._conn: psycopg.Connection[DictRow] | None = None

    def __enter__(self) -> AdvisoryLock:
        conn = connect(self.location)
        try:
            ensure_writers_table(conn)
            locked = conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (self.key,)).fetchone()
            if not (locked and locked["got"]):
                row = conn.execute(
                    "SELECT holder FROM waypoint_thread_writers WHERE thread_id = %s",
                    (self.thread_id,),
                ).fetchone()
                raise busy_error(self.thread_id, row["holder"] if row else "unknown")
            holder = f"{os.getpid()}@{socket.gethostname()}"
            conn.execute(MARK_SQL, (self.thread_id, self.key, holder))
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return self

    def __exit__(self, *exc_info: object) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        import psycopg

        try:
            with contextlib.suppress(psycopg.Error):  # a lost connection released the lock already
                conn.execute(
                    "DELETE FROM waypoint_thread_writers WHERE thread_id = %s", (self.thread_id,)
                )
                conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        finally:
            conn.close()  # closing the session releases the lock in any case
