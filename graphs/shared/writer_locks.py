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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
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
            with _session(self.saver) as session:
                key = lock_key(thread_id)
                try:
                    locked, rows = session(key, thread_id)
                except BaseException:
                    session(key, None)  # the lock may have been taken before the read failed
                    raise
                if not locked:
                    raise ThreadChangedError(thread_id, BUSY)
                try:
                    yield rows
                finally:
                    session(key, None)

    @contextlib.asynccontextmanager
    async def awriting(self, thread_id: str) -> AsyncIterator[list[Row] | None]:
        """`writing` for a caller on the saver's event loop."""
        async with self.local_async[_stripe(thread_id)]:
            if not self.async_postgres:
                yield None
                return
            async with _asession(self.saver) as session:
                key = lock_key(thread_id)
                try:
                    locked, rows = await session(key, thread_id)
                except BaseException:
                    await session(key, None)
                    raise
                if not locked:
                    raise ThreadChangedError(thread_id, BUSY)
                try:
                    yield rows
                finally:
                    await session(key, None)


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


# A session's one call: (key, thread) tries the lock and reads the thread's newest checkpoints,
# in one round trip (a pipeline), returning (locked, rows); (key, None) releases the lock.
Session = Callable[[int, str | None], tuple[bool, list[Row]] | None]
AsyncSession = Callable[[int, str | None], Awaitable[tuple[bool, list[Row]] | None]]


def _lock_and_read(conn: Any, key: int, thread_id: str | None) -> tuple[bool, list[Row]] | None:
    if thread_id is None:
        conn.execute(UNLOCK, (key,))
        return None
    with conn.pipeline():
        locking = conn.execute(TRY_LOCK, (key,))
        reading = conn.execute(POSTGRES_NEWEST, (thread_id, NEWEST))
        return bool(_value(locking.fetchone())), rows_from_sql(reading.fetchall())


async def _alock_and_read(
    conn: Any, key: int, thread_id: str | None
) -> tuple[bool, list[Row]] | None:
    if thread_id is None:
        await conn.execute(UNLOCK, (key,))
        return None
    async with conn.pipeline():
        locking = await conn.execute(TRY_LOCK, (key,))
        reading = await conn.execute(POSTGRES_NEWEST, (thread_id, NEWEST))
        return bool(_value(await locking.fetchone())), rows_from_sql(await reading.fetchall())


@contextlib.contextmanager
def _session(saver: Any) -> Iterator[Session]:
    """One database session of the saver's: its connection (under its lock, as the saver itself
    uses it), or one of its pool's, held for the while (a session's advisory lock is released in
    that session)."""
    from psycopg import Connection

    if isinstance(saver.conn, Connection):

        def run(key: int, thread_id: str | None) -> tuple[bool, list[Row]] | None:
            with saver.lock:
                return _lock_and_read(saver.conn, key, thread_id)

        yield run
        return
    with saver.conn.connection() as pooled:
        yield lambda key, thread_id: _lock_and_read(pooled, key, thread_id)


@contextlib.asynccontextmanager
async def _asession(saver: Any) -> AsyncIterator[AsyncSession]:
    from psycopg import AsyncConnection

    if isinstance(saver.conn, AsyncConnection):

        async def run(key: int, thread_id: str | None) -> tuple[bool, list[Row]] | None:
            async with saver.lock:
                return await _alock_and_read(saver.conn, key, thread_id)

        yield run
        return
    async with saver.conn.connection() as pooled:
        yield lambda key, thread_id: _alock_and_read(pooled, key, thread_id)
