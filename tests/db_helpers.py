"""Raw SQL on a test's database, SQLite or PostgreSQL, for checks and for damage the app must survive."""

from __future__ import annotations

import sqlite3
from typing import Any

from app.db.location import parse_location


def execute(
    db: str, sqlite_sql: str, postgres_sql: str, params: tuple = ()
) -> list[tuple[Any, ...]]:
    """Run the statement for the backend of `db` (a path or a URL); rows, or [rowcount] for DML."""
    location = parse_location(db)
    if location.is_postgres:
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(postgres_sql, params)
            return cur.fetchall() if cur.description else [(cur.rowcount,)]
    with sqlite3.connect(db) as conn:
        cursor = conn.execute(sqlite_sql, params)
        return cursor.fetchall() if cursor.description else [(cursor.rowcount,)]


def checkpoint_count(db: str) -> int:
    sql = "SELECT COUNT(*) FROM checkpoints"
    return execute(db, sql, sql)[0][0]
