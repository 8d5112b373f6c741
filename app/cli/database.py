"""How a CLI command opens the database it works on: with its settings (flags over the
environment) and the busy timeout they give, closed when the command is done."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from app.cli.io import load_settings

if TYPE_CHECKING:
    from app.config import Settings
    from app.db.base import Database


def database_of(settings: Settings) -> AbstractContextManager[Database]:
    """The database `settings` name, opened (app.db is imported here: --help stays quick)."""
    from app.db import open_database

    return open_database(settings.database, settings.busy_timeout)


@contextmanager
def opened(db: str | None, **overrides: object) -> Iterator[tuple[Settings, Database]]:
    """A command's settings (its --db and other flags over the environment) and its open database."""
    settings = load_settings(db=db, **overrides)
    with database_of(settings) as database:
        yield settings, database
