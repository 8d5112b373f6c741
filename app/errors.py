"""Errors for the person at the terminal, and the exit codes they map to."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    RUN_FAILED = 1
    USAGE = 2
    CONFIG = 3
    INTERRUPTED = 130


def printable(text: str, keep: str = "") -> str:
    """`text` safe to echo to a terminal: control and other unprintable characters (a newline in a
    file name, ESC, a right-to-left override) are shown escaped (\\n, \\x1b, \\u202e), except those
    in `keep`. tools/files.py has the same rule for what the tools say (tools cannot import app)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


class AppError(Exception):
    """Base of errors shown to the user as one clear message (no traceback) with an exit status.
    The message is one line: a name it quotes cannot break it or send escape codes."""

    exit_status = ExitStatus.RUN_FAILED

    def __str__(self) -> str:
        return printable(super().__str__())


class UsageError(AppError):
    """Raised when the user's input is unusable: a bad thread id, empty or oversized message."""

    exit_status = ExitStatus.USAGE


class ConfigError(AppError):
    """Raised when configuration or the environment is wrong: unknown model, damaged database file."""

    exit_status = ExitStatus.CONFIG


class NotFoundError(UsageError):
    """Raised when a thread or checkpoint that is named does not exist."""


class ThreadNotFoundError(NotFoundError):
    """Raised when the named thread does not exist; the hint suits the terminal, and the server
    gives its own (app/server/errors.py)."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"thread {thread_id} does not exist; list them with: waypoint threads list"
        )
        self.thread_id = thread_id


class ConflictError(UsageError):
    """Raised when a request collides with existing data (a fork target that already exists)."""


class ThreadBusyError(UsageError):
    """Raised when another process holds the write lock of the thread."""


class AgentRunError(AppError):
    """Raised when a one-shot turn did not answer what was asked: it failed (the failure handler
    ended it, an action was not done) or was stopped (a budget, the step limit, a loop)."""

    exit_status = ExitStatus.RUN_FAILED
