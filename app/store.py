"""Thread ids as the CLI and the server accept them, and `open_checkpointer` for callers that need
only the saver. Opening, locking and the backends themselves are `app.db`'s."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from app.db import DbRef, open_database
from app.errors import UsageError

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

THREAD_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def new_thread_id() -> str:
    """A fresh thread id: the time it was made and a random suffix."""
    return f"{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"


def validate_thread_id(thread_id: str) -> str:
    if not THREAD_ID.fullmatch(thread_id or "") or thread_id in {".", ".."}:
        raise UsageError(
            f"invalid thread id {thread_id[:80]!r}: use 1-64 letters, digits, '.', '_' or '-' "
            "(for example --thread demo)"
        )
    return thread_id


@contextlib.contextmanager
def open_checkpointer(db: DbRef | Path, busy_timeout: float = 5.0) -> Iterator[BaseCheckpointSaver]:
    """Just the saver of `open_database(db)`, for callers that need nothing else."""
    with open_database(db, busy_timeout) as database:
        yield database.saver
