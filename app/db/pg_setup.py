"""First-time migrations on PostgreSQL, one process at a time.

LangGraph's migrations include `CREATE INDEX CONCURRENTLY`, which waits for every transaction open at
its start to finish. A second process blocked in `pg_advisory_lock()` is such a transaction, while it
waits for the first process to finish the migration: a deadlock. So the lock is only ever *tried*,
between short sleeps, and nobody waits inside the server."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

SETUP_LOCK_KEY = 0x5761_7970_6F69_6E74  # "Waypoint"
POLL_SECONDS = 0.05
# (what, database URL) whose migrations this process has run: a server opens the database for every
# request, and the migrations need only run once.
_MIGRATED: set[tuple[str, str]] = set()


def migrate_once(connection: Any, what: str, url: str, migrate: Callable[[], None]) -> None:
    """Run `migrate` under the setup lock, unless this process already did for this database."""
    if (what, url) in _MIGRATED:
        return
    with setup_lock(connection):
        migrate()
    _MIGRATED.add((what, url))


@contextlib.contextmanager
def setup_lock(connection: Any, timeout: float = 120.0) -> Iterator[None]:
    """Hold Waypoint's setup lock on this (autocommit) psycopg connection."""
    deadline = time.monotonic() + timeout
    while not _try_lock(connection):
        if time.monotonic() > deadline:
            raise TimeoutError(f"another process held the setup lock for over {timeout:.0f} s")
        time.sleep(POLL_SECONDS)
    try:
        yield
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))


def _try_lock(connection: Any) -> bool:
    row = connection.execute("SELECT pg_try_advisory_lock(%s) AS locked", (SETUP_LOCK_KEY,))
    found = row.fetchone()
    return bool(found["locked"] if isinstance(found, dict) else found[0])
