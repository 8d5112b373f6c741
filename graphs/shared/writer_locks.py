"""Who may store a thread's checkpoint right now (graphs/shared/guarded_writes.py): one writer per
thread in the process (striped locks), and on PostgreSQL one per thread across every process on the
database (a session advisory lock, tried, never waited for: a process storing a checkpoint of the
same thread at this moment is the other run the rule refuses, and no wait can deadlock)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from graphs.shared.guard_rows import ThreadChangedError, saver_kind

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
    def writing(self, thread_id: str) -> Iterator[None]:
        with self.local[_stripe(thread_id)]:
            if not self.postgres:
                yield
                return
            with _session(self.saver) as run:
                if not run(TRY_LOCK, lock_key(thread_id)):
                    raise ThreadChangedError(thread_id, BUSY)
                try:
                    yield
                finally:
                    run(UNLOCK, lock_key(thread_id))

    @contextlib.asynccontextmanager
    async def awriting(self, thread_id: str) -> AsyncIterator[None]:
        async with self.local_async[_stripe(thread_id)]:
            if not self.async_postgres:
                yield
                return
            async with _asession(self.saver) as run:
                if not await run(TRY_LOCK, lock_key(thread_id)):
                    raise ThreadChangedError(thread_id, BUSY)
                try:
                    yield
                finally:
                    await run(UNLOCK, lock_key(thread_id))


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


@contextlib.contextmanager
def _session(saver: Any) -> Iterator[Callable[[str, int], Any]]:
    """Run statements in one database session of the saver's: its connection (under its lock, as
    the saver itself uses it), or one of its pool's, held for the while (a session's advisory
    lock is released in that session)."""
    from psycopg import Connection

    if isinstance(saver.conn, Connection):

        def run(sql: str, key: int) -> Any:
            with saver.lock:
                return _value(saver.conn.execute(sql, (key,)).fetchone())

        yield run
        return
    with saver.conn.connection() as pooled:
        yield lambda sql, key: _value(pooled.execute(sql, (key,)).fetchone())


@contextlib.asynccontextmanager
async def _asession(saver: Any) -> AsyncIterator[Callable[[str, int], Awaitable[Any]]]:
    from psycopg import AsyncConnection

    async def run_on(conn: Any, sql: str, key: int) -> Any:
        return _value(await (await conn.execute(sql, (key,))).fetchone())

    if isinstance(saver.conn, AsyncConnection):

        async def run(sql: str, key: int) -> Any:
            async with saver.lock:
                return await run_on(saver.conn, sql, key)

        yield run
        return
    async with saver.conn.connection() as pooled:
        yield lambda sql, key: run_on(pooled, sql, key)
