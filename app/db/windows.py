"""Learned context windows as rows of `waypoint_windows`, one per endpoint and model, so a window an
overflow taught one process is known to every later one (and to `doctor`): the same SQL on SQLite
and PostgreSQL, each statement on a short connection of its own."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.db.location import DatabaseLocation

log = logging.getLogger(__name__)

WINDOWS_DDL = (
    "CREATE TABLE IF NOT EXISTS waypoint_windows (base_url TEXT NOT NULL, model TEXT NOT NULL, "
    "tokens INTEGER NOT NULL, source TEXT NOT NULL, exact INTEGER NOT NULL, margin REAL NOT NULL, "
    "learned_at TEXT NOT NULL, PRIMARY KEY (base_url, model))"
)
SAVE = (
    "INSERT INTO waypoint_windows (base_url, model, tokens, source, exact, margin, learned_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (base_url, model) DO UPDATE SET "
    "tokens = excluded.tokens, source = excluded.source, exact = excluded.exact, "
    "margin = excluded.margin, learned_at = excluded.learned_at"
)
LOAD = (
    "SELECT tokens, source, exact, margin, learned_at FROM waypoint_windows "
    "WHERE base_url = %s AND model = %s"
)
FORGET = "DELETE FROM waypoint_windows WHERE base_url = %s AND model = %s"
# What a stored row may say: anything else (a hand-edited or hostile row) is ignored, not used.
TOKENS_RANGE = (128, 100_000_000)
MARGIN_RANGE = (0.05, 1.0)
BUSY_TIMEOUT = 5.0  # seconds: the row is an aid, never worth a long wait


@dataclass(frozen=True)
class LearnedWindow:
    """A window learned from the endpoint's answers: its size, how it was learned and when."""

    tokens: int
    source: str
    exact: bool
    margin: float
    learned_at: str  # ISO 8601, UTC


def load_window(location: DatabaseLocation, base_url: str, model: str) -> LearnedWindow | None:
    """The window stored for this endpoint and model; None when there is none, the database does
    not exist yet (it is not created for a read), or the row does not make sense."""
    rows = _statement(location, LOAD, (base_url, model), write=False)
    if not rows:
        return None
    tokens, source, exact, margin, learned_at = rows[0]
    if not _plausible(tokens, margin) or not isinstance(source, str):
        log.warning("ignoring the stored window of %s %s: %r", base_url, model, rows[0])
        return None
    return LearnedWindow(int(tokens), source, bool(exact), float(margin), str(learned_at))


def save_window(
    location: DatabaseLocation, base_url: str, model: str, window: LearnedWindow
) -> None:
    """Keep (or replace) the window of this endpoint and model."""
    row = (base_url, model, window.tokens, window.source[:200], int(window.exact))
    _statement(location, SAVE, (*row, window.margin, window.learned_at), write=True)


def forget_window(location: DatabaseLocation, base_url: str, model: str) -> None:
    """Drop the stored window (the endpoint now reports one of its own that differs)."""
    _statement(location, FORGET, (base_url, model), write=True)


def _plausible(tokens: object, margin: object) -> bool:
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        return False
    if not isinstance(margin, int | float):
        return False
    return (
        TOKENS_RANGE[0] <= tokens <= TOKENS_RANGE[1]
        and MARGIN_RANGE[0] <= margin <= MARGIN_RANGE[1]
    )


def _statement(location: DatabaseLocation, sql: str, params: tuple, *, write: bool) -> list[tuple]:
    run = _postgres if location.is_postgres else _sqlite
    return run(location, sql, params, write)


def _sqlite(location: DatabaseLocation, sql: str, params: tuple, write: bool) -> list[tuple]:
    from app.db.sqlite import connect

    assert location.path is not None
    if not write and not location.path.exists():
        return []
    connection = connect(location.path, BUSY_TIMEOUT)
    try:
        with connection:
            if not write and not _has_table(connection.execute):
                return []
            if write:
                connection.execute(WINDOWS_DDL)
            return connection.execute(sql.replace("%s", "?"), params).fetchall()
    finally:
        connection.close()


def _has_table(execute: Callable[..., sqlite3.Cursor]) -> bool:
    found = execute("SELECT 1 FROM sqlite_master WHERE name = 'waypoint_windows'").fetchall()
    return bool(found)


def _postgres(location: DatabaseLocation, sql: str, params: tuple, write: bool) -> list[tuple]:
    from psycopg.rows import tuple_row

    from app.db.pg_connect import connect
    from app.db.pg_setup import migrate_once

    assert location.url is not None
    with connect(location) as connection:
        migrate_once(connection, "windows", location.url, lambda: _create_table(connection))
        with connection.cursor(row_factory=tuple_row) as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []


def _create_table(connection: Any) -> None:
    connection.execute(WINDOWS_DDL)
