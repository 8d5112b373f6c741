"""Errors for the person at the terminal, and the exit codes they map to."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    RUN_FAILED = 1
    USAGE = 2
    CONFIG = 3
    INTERRUPTED = 130


class AppError(Exception):
    """Base of errors shown to the user as one clear message (no traceback) with an exit status."""

    exit_status = ExitStatus.RUN_FAILED


class UsageError(AppError):
    """Raised when the user's input is unusable: a bad thread id, empty or oversized message."""

    exit_status = ExitStatus.USAGE


class ConfigError(AppError):
    """Raised when configuration or the environment is wrong: unknown model, damaged database file."""

    exit_status = ExitStatus.CONFIG


class ThreadBusyError(UsageError):
    """Raised when another process holds the write lock of the thread."""


class AgentRunError(AppError):
    """Raised when a turn ended in the failure handler; its message is the agent's failure answer."""

    exit_status = ExitStatus.RUN_FAILED
