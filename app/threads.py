"""Thread services over the checkpoint database: list threads (SQL only) and a thread's turn history."""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from app.errors import ConfigError
from graphs.state import unreadable_reason

GREGORIAN_TO_UNIX_100NS = 0x01B21DD213814000


@dataclass(frozen=True)
class ThreadSummary:
    thread_id: str
    title: str
    turns: int
    checkpoints: int
    updated_at: str
    size_bytes: int = 0
    interrupted: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


LIST_THREADS_SQL = """
SELECT thread_id,
       COUNT(*) AS checkpoints,
       MAX(checkpoint_id) AS last_checkpoint,
       MAX(CAST(json_extract(CAST(metadata AS TEXT), '$.turn') AS INTEGER)) AS turns,
       (SELECT json_extract(CAST(first.metadata AS TEXT), '$.preview') FROM checkpoints AS first
         WHERE first.thread_id = c.thread_id AND first.checkpoint_ns = ''
         ORDER BY first.checkpoint_id LIMIT 1) AS title
FROM checkpoints AS c
WHERE checkpoint_ns = ''
GROUP BY thread_id
ORDER BY last_checkpoint DESC
"""


def list_threads(
    connection: sqlite3.Connection, db_path: Path | None = None
) -> list[ThreadSummary]:
    """Every thread, newest first, read from checkpoint metadata without deserialising state; with
    `db_path`, threads whose writer died mid-run are marked interrupted."""
    from app.maintenance import thread_sizes
    from app.store import dead_writer

    sizes = thread_sizes(connection)
    rows = connection.execute(LIST_THREADS_SQL).fetchall()
    return [
        ThreadSummary(
            thread_id,
            title or "",
            turns or 0,
            checkpoints,
            checkpoint_time(last),
            size_bytes=sizes.get(thread_id, 0),
            interrupted=db_path is not None and dead_writer(db_path, thread_id) is not None,
        )
        for thread_id, checkpoints, last, turns, title in rows
    ]


def checkpoint_time(checkpoint_id: str) -> str:
    """LangGraph checkpoint ids are UUIDv6: their first 60 bits are the creation time."""
    value = uuid.UUID(checkpoint_id).int >> 64
    ticks = ((value >> 32) << 28) | (((value >> 16) & 0xFFFF) << 12) | (value & 0x0FFF)
    seconds = (ticks - GREGORIAN_TO_UNIX_100NS) / 10_000_000
    return datetime.fromtimestamp(seconds, UTC).astimezone().isoformat(timespec="seconds")


def load_state(graph: CompiledStateGraph, thread_id: str) -> StateSnapshot:
    """The thread's head state, or a clear error when a checkpoint cannot be trusted or decoded."""
    config = {"configurable": {"thread_id": thread_id}}
    try:
        snapshot = graph.get_state(config)
    except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
        raise unreadable(thread_id, "head", f"{type(exc).__name__}: {exc}") from exc
    reason = unreadable_reason(snapshot.values)
    if reason:
        raise unreadable(thread_id, snapshot.config["configurable"].get("checkpoint_id"), reason)
    return snapshot


def unreadable(thread_id: str, checkpoint: str | None, reason: str) -> ConfigError:
    return ConfigError(
        f"checkpoint {checkpoint} of thread {thread_id} is unreadable ({reason[:200]}); it was "
        "not loaded. Continue in another thread, or restore the database from a backup"
    )


def thread_exists(connection: sqlite3.Connection, thread_id: str) -> bool:
    row = connection.execute(
        "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,)
    ).fetchone()
    return row is not None
