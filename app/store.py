"""Open the checkpoint database (SQLite, WAL, strict deserialisation) and lock threads for writing."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from app.errors import ConfigError, ThreadBusyError, UsageError

SQLITE_HEADER = b"SQLite format 3\x00"
THREAD_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def validate_thread_id(thread_id: str) -> str:
    if not THREAD_ID.fullmatch(thread_id or "") or thread_id in {".", ".."}:
        raise UsageError(
            f"invalid thread id {thread_id[:80]!r}: use 1-64 letters, digits, '.', '_' or '-' "
            "(for example --thread demo)"
        )
    return thread_id


def strict_serializer() -> JsonPlusSerializer:
    """Only LangGraph's safe types (messages, datetimes, …) may be revived from a checkpoint."""
    return JsonPlusSerializer(allowed_msgpack_modules=None)


@contextlib.contextmanager
def open_checkpointer(path: Path, busy_timeout: float = 5.0) -> Iterator[SqliteSaver]:
    """A SqliteSaver on `path`; a damaged or unusable file is an error, never overwritten."""
    connection = connect(path, busy_timeout)
    try:
        saver = SqliteSaver(connection, serde=strict_serializer())
        try:
            saver.setup()
        except sqlite3.DatabaseError as exc:
            raise database_error(path, exc) from exc
        yield saver
    finally:
        connection.close()


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    _check_file(path)
    try:
        connection = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False)
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        raise database_error(path, exc) from exc
    return connection


def _check_file(path: Path) -> None:
    if path.is_dir():
        raise ConfigError(f"database path {path} is a directory; pass a file path with --db")
    if path.exists():
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
        if header and header != SQLITE_HEADER:
            raise ConfigError(
                f"{path} is not a Waypoint database (not SQLite); it was left untouched. "
                "Pass another file with --db or APP_DB"
            )
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot create the database {path}: {exc.strerror}") from exc


def database_error(path: Path, exc: sqlite3.DatabaseError) -> ConfigError:
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        return ConfigError(f"the database {path} is read-only; make it writable or use --db")
    if "locked" in text or "busy" in text:
        return ConfigError(f"the database {path} is locked by another process; try again")
    if "malformed" in text or "not a database" in text:
        return ConfigError(
            f"the database {path} is damaged ({text}); it was left untouched. "
            "Restore a backup or pass another file with --db"
        )
    return ConfigError(f"cannot use the database {path}: {text}")


def lock_path(db_path: Path, thread_id: str) -> Path:
    return db_path.parent / f"{db_path.name}.locks" / f"{thread_id}.lock"


def dead_writer(db_path: Path, thread_id: str) -> int | None:
    """The pid of a writer that died mid-run (its lock file still names it and nobody holds the
    lock), else None. A clean exit empties the lock file."""
    try:
        fd = os.open(lock_path(db_path, thread_id), os.O_RDWR)
    except OSError:
        return None
    try:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if not holder.isdigit():
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # alive and writing right now
        return int(holder)
    finally:
        os.close(fd)  # also releases the probe's lock


class ThreadLock:
    """An exclusive, process-wide write lock per thread (flock: released by the kernel if we die)."""

    def __init__(self, db_path: Path, thread_id: str) -> None:
        self.path = lock_path(db_path, thread_id)
        self.thread_id = thread_id
        self._fd: int | None = None

    def __enter__(self) -> ThreadLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise ThreadBusyError(
                    f"thread {self.thread_id} is busy (pid {holder}): another Waypoint process "
                    "is writing to it; wait for it to finish, or use another --thread"
                ) from exc
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
