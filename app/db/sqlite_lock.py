"""Per-thread write locks for a SQLite database: flock files in `<db>.locks/`, released by the
kernel when the holder dies; the file names the holder's pid until it exits cleanly."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from app.errors import ConfigError, ThreadBusyError

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def lock_dir(db_path: Path) -> Path:
    return db_path.parent / f"{db_path.name}.locks"


def lock_path(db_path: Path, thread_id: str) -> Path:
    return lock_dir(db_path) / f"{thread_id}.lock"


def busy_error(thread_id: str, holder: str) -> ThreadBusyError:
    return ThreadBusyError(
        f"thread {thread_id} is busy (pid {holder}): another Waypoint process "
        "is writing to it; wait for it to finish, or use another --thread"
    )


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
        self.path = lock_path(Path(db_path), thread_id)
        self.thread_id = thread_id
        self._fd: int | None = None

    def __enter__(self) -> ThreadLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a read-only or full file system, a file where the directory goes
            raise self._unusable(exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise busy_error(self.thread_id, holder) from exc
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise self._unusable(exc) from exc
        self._fd = fd
        return self

    def _unusable(self, exc: OSError) -> ConfigError:
        full = " (the disk is full; free space and retry)" if exc.errno in DISK_FULL else ""
        return ConfigError(
            f"cannot lock thread {self.thread_id}: the lock file {self.path} cannot be written "
            f"({exc.strerror}){full}"
        )

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
