"""What a stored checkpoint that cannot be trusted becomes: an UnreadableCheckpointError inside the
database layer, and "checkpoint … is unreadable" (exit 3) for the person at the terminal. Light on
purpose: the listing commands import it without LangGraph."""

from __future__ import annotations

from app.errors import ConfigError

# What a decoder, LangGraph's loading code or a mistyped value raises on data of the wrong shape.
SHAPE_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    NotImplementedError,
    RecursionError,
    OverflowError,
)


class UnreadableCheckpointError(ValueError):
    """Raised by every read of the saver when a stored checkpoint or write does not decode, holds a
    type outside the allowlist, or has the wrong shape; prune leaves its thread alone."""

    def __init__(
        self, reason: str, thread_id: str | None = None, checkpoint_id: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason, self.thread_id, self.checkpoint_id = reason, thread_id, checkpoint_id


def unreadable(thread_id: str | None, checkpoint: str | None, reason: str) -> ConfigError:
    """The error the person at the terminal gets for an unreadable checkpoint (exit 3)."""
    return ConfigError(
        f"checkpoint {checkpoint or 'head'} of thread {thread_id} is unreadable ({reason[:200]}); "
        "it was not loaded. Continue in another thread, or restore the database from a backup"
    )
