"""The checkpoint database behind `--db`: SQLite (a file path) or PostgreSQL (a postgresql:// URL).
`open_database` and `lock_thread` are the only places that choose the backend."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from app.db.base import Database
from app.db.location import DatabaseLocation, parse_location
from app.db.unreadable import UnreadableCheckpointError, unreadable
from app.errors import ConfigError

DbRef = str | Path | DatabaseLocation


def as_location(db: DbRef) -> DatabaseLocation:
    return db if isinstance(db, DatabaseLocation) else parse_location(db)


@contextlib.contextmanager
def open_database(db: DbRef, busy_timeout: float = 5.0) -> Iterator[Database]:
    """The database at `db`, set up (tables, migrations) and closed again at the end."""
    location = as_location(db)
    if location.is_postgres:
        opener = _postgres_opener()
    else:
        from app.db.sqlite import open_sqlite

        def opener(location: DatabaseLocation) -> AbstractContextManager[Database]:
            return open_sqlite(location, busy_timeout)

    with opener(location) as database:
        try:
            yield database
        except UnreadableCheckpointError as exc:
            # The one boundary for a tampered or damaged checkpoint that a command read without
            # checking itself (the saver's reads raise this instead of handing back raw data).
            raise unreadable(exc.thread_id, exc.checkpoint_id, exc.reason) from exc


def _postgres_opener() -> Callable[[DatabaseLocation], AbstractContextManager[Database]]:
    try:
        from app.db.postgres import open_postgres
    except ImportError as exc:  # the [postgres] extra is not installed
        raise ConfigError(
            f"PostgreSQL support is not installed ({exc.name} is missing); install it with: "
            "pip install -e '.[postgres]'"
        ) from None
    return open_postgres


def thread_interrupted(db: DbRef, thread_id: str) -> bool:
    """A writer died mid-run on this thread (its mark is left and nobody holds its lock)."""
    location = as_location(db)
    if location.is_postgres:
        from app.db.pg_connect import connect
        from app.db.pg_lock import dead_writers

        with connect(location) as conn:
            return thread_id in dead_writers(conn)
    from app.db.sqlite_lock import dead_writer

    assert location.path is not None
    return dead_writer(location.path, thread_id) is not None


def lock_thread(db: DbRef, thread_id: str) -> AbstractContextManager[object]:
    """The exclusive write lock of one thread: an flock file next to a SQLite database, a session
    advisory lock on a PostgreSQL server. A second writer gets ThreadBusyError."""
    location = as_location(db)
    if location.is_postgres:
        from app.db.pg_lock import AdvisoryLock

        return AdvisoryLock(location, thread_id)
    from app.db.sqlite_lock import ThreadLock

    assert location.path is not None
    return ThreadLock(location.path, thread_id)
