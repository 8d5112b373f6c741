"""Hints that name a command: printed so they can be pasted as they are (`waypoint …`)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config import Settings

PROGRAM = "waypoint"  # the console script in pyproject.toml (the same as `python -m app`)


def db_flag(flag: str | None, settings: Settings) -> str | None:
    """The --db a hint must repeat: the one given on the command line (APP_DB still holds in the
    same shell), as the settings parsed it; never a password (a PostgreSQL URL's is masked)."""
    return settings.database.label if flag else None


def command(*words: str, db: str | None = None) -> str:
    """`waypoint WORDS…`, quoted for a POSIX shell; with `db` (a --db the user gave) appended, so
    the hint acts on the same database."""
    extra = ("--db", db) if db else ()
    return shlex.join([PROGRAM, *words, *extra])
