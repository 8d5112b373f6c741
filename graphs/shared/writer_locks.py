"""Who may store a thread's checkpoint right now (graphs/shared/guarded_writes.py): one writer per
thread in the process (striped locks), and on PostgreSQL one per thread across every process on the
database (a session advisory lock, tried, never waited for: a process storing a checkpoint of the
same thread at this moment is the other run the rule refuses, and no wait can deadlock). On
PostgreSQL the lock is tried and the thread's newest checkpoints read in one round trip."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from graphs.shared.guard_rows import (
    NEWEST,
    POSTGRES_NEWEST,
    Row,
    ThreadChangedError,
    rows_from_sql,
    saver_kind,
)

STRIPES = 64  # locks per process, by thread id: runs of different threads rarely wait
BUSY = "another process is storing a checkpoint of it"


class WriterLocks:
    """The locks of one saver."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        kind = saver_kind(saver)
        # Each path locks the connection kind it is used with (an async saver's sync `put` runs
        # its `aput`, which locks).
        self.postgres, self.async_postgres = kind == "postgres", kind == "async-postgres"
        self.local = [threading.Lock() for _ in range(STRIPES)]
        self.local_async = [asyncio.Lock() for _ in range(STRIPES)]

    @contextlib.contextmanager
    def writing(self, thread_id: str) -> Iterator[list[Row] | None]:
        """Hold the thread's writer lock. On PostgreSQL, yields the thread's newest checkpoints,
        read in the round trip that took the lock (by a statement of its own, run after the lock
        was taken: one statement's snapshot could predate the commit of the lock's last holder).
        Elsewhere yields None: the caller reads them."""
        with self.local[_stripe(thread_id)]:
            if not self.postgres:
                yield None
                return
            key = lock_key(thread_id)
            with _session(self.saver) as (conn, held):
                try:
                    with held:
                        locked, rows = _lock_and_read(conn, key, thread_id)
                except BaseException:
                    with held, contextlib.suppress(Exception):
                        _unlock(conn, key)  # the lock may have been taken before the read failed
                    raise
                if not locked:
                    raise ThreadChangedError(thread_id, BUSY)
                try:
                    yield rows
                finally:
                    with held:
                        _unlock(conn, key)

    @contextlib.asynccontextmanager
    async def awriting(self, thread_id: str) -> AsyncIterator[list[Row] | None]:
        """`writing` for a caller on the saver's event loop."""
        async with self.local_async[_stripe(thread_id)]:
            if not self.async_postgres:
                yield None
                return
            key = lock_key(thread_id)
            async with _asession(self.saver) as (conn, held):
                try:
                    async with held:
                        locked, rows = await _alock_and_read(conn, key, thread_id)
                except BaseException:
                    async with held:
                        with contextlib.suppress(Exception):
                            await _aunlock(conn, key)
                    raise
                if not locked:
                    raise ThreadChangedError(thread_id, BUSY)
                try:
                    yield rows
                finally:
                    async with held:
                        await _aunlock(conn, key)


TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"
UNLOCK = "SELECT pg_advisory_unlock(%s)"


def lock_key(thread_id: str) -> int:
    """A signed 64-bit advisory lock key of its own for each thread."""
    digest = hashlib.blake2b(f"waypoint-thread:{thread_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _value(row: Any) -> Any:
    """A one-column row's value (the savers' connections make rows dicts)."""
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def _stripe(thread_id: str) -> int:
    return lock_key(thread_id) % STRIPES


def _lock_and_read(conn: Any, key: int, thread_id: str) -> tuple[bool, list[Row]]:
    """Try the lock and read the thread's newest checkpoints: one round trip (a pipeline)."""
    with conn.pipeline():
        locking = conn.execute(TRY_LOCK, (key,))
        reading = conn.execute(POSTGRES_NEWEST, (thread_id, NEWEST))
        return bool(_value(locking.fetchone())), rows_from_sql(reading.fetchall())


def _unlock(conn: Any, key: int) -> None:
    conn.execute(UNLOCK, (key,))


async def _alock_and_read(conn: Any, key: int, thread_id: str) -> tuple[bool, list[Row]]:
    async with conn.pipeline():
        locking = await conn.execute(TRY_LOCK, (key,))
        reading = await conn.execute(POSTGRES_NEWEST, (thread_id, NEWEST))
        return bool(_value(await locking.fetchone())), rows_from_sql(await reading.fetchall())


async def _aunlock(conn: Any, key: int) -> None:
    await conn.execute(UNLOCK, (key,))


@contextlib.contextmanager
def _session(saver: Any) -> Iterator[tuple[Any, Any]]:
    """One database session of the saver's, and what to hold while using it: its connection and
    its lock (as the saver itself uses them), or one of its pool's, held for the while (a
    session's advisory lock is released in that session) with nothing more to hold."""
    from psycopg import Connection

    if isinstance(saver.conn, Connection):
        yield saver.conn, saver.lock
        return
    with saver.conn.connection() as pooled:
        yield pooled, contextlib.nullcontext()


@contextlib.asynccontextmanager
async def _asession(saver: Any) -> AsyncIterator[tuple[Any, Any]]:
    from psycopg import AsyncConnection

    if isinstance(saver.conn, AsyncConnection):
        yield saver.conn, saver.lock
        return
    async with saver.conn.connection() as pooled:
        yield pooled, contextlib.nullcontext()
