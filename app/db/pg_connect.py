"""Connections to a PostgreSQL database named by a postgresql:// URL, and their failures as clear
ConfigErrors that never show the password."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from app.db.location import DatabaseLocation, scrub
from app.errors import ConfigError

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import DictRow

CONNECT_TIMEOUT = 5
URL_FORM = "postgresql://user:password@host:5432/dbname"
UNREACHABLE = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "could not translate host name",
    "failed to resolve host",
    "no route to host",
    "network is unreachable",
    "server closed the connection",
    "no such file or directory",
)
AUTH_FAILED = ("password authentication failed", "no password supplied", "authentication failed")
MISSING_DATABASE = re.compile(r'database "([^"]+)" does not exist')


def connect(location: DatabaseLocation) -> psycopg.Connection[DictRow]:
    """An autocommit connection with dict rows, as LangGraph's Postgres saver and store require."""
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError:
        raise ConfigError(
            "PostgreSQL support is not installed; install it with: pip install -e '.[postgres]'"
        ) from None
    assert location.url is not None
    try:
        return psycopg.connect(
            location.url,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            connect_timeout=CONNECT_TIMEOUT,
        )
    except psycopg.Error as exc:
        raise connection_error(location, exc) from None


def connection_error(location: DatabaseLocation, exc: BaseException) -> ConfigError:
    """What went wrong and what to do, for the person at the terminal; no password in it."""
    reason = _reason(scrub(str(exc), location))
    lowered = reason.lower()
    where = location.label
    if any(marker in lowered for marker in AUTH_FAILED):
        return ConfigError(
            f"PostgreSQL refused the login for {where} ({reason}); check the user and password "
            "in --db/APP_DB (or use PGPASSWORD or ~/.pgpass)"
        )
    missing = MISSING_DATABASE.search(reason)
    if missing:
        return ConfigError(
            f"the database {missing.group(1)!r} does not exist on the server of {where}; create "
            f"it (createdb {missing.group(1)}) or name another one in --db/APP_DB"
        )
    if any(marker in lowered for marker in UNREACHABLE):
        return ConfigError(
            f"cannot reach the PostgreSQL server for {where} ({reason}); start the server, or "
            "fix the host and port in --db/APP_DB"
        )
    if "invalid" in lowered or "missing" in lowered or "syntax" in lowered:
        return ConfigError(
            f"invalid PostgreSQL URL {where} ({reason}); fix --db/APP_DB, whose form is {URL_FORM}"
        )
    return ConfigError(f"cannot use the PostgreSQL database {where}: {reason}")


def _reason(text: str) -> str:
    """The informative part of a libpq message: without 'connection failed:' and hints."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else "unknown error"
    first = re.sub(r"^(connection failed: )+", "", first)
    first = re.sub(r'^connection to server at "[^"]*"(?: \([^)]*\))?, port \d+ failed: ', "", first)
    first = first.replace("FATAL:  ", "")
    return first[:300]
