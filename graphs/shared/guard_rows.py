"""The thread's newest checkpoints as the one-writer rule reads them (graphs/shared/guard.py), and the
error it raises: one indexed read of ids and metadata on SQLite, the saver's own `list` elsewhere."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.errors import GraphBubbleUp

NEWEST = 3  # a step's checkpoint, its parent and the one before: the links a step can have forked


class ThreadChangedError(GraphBubbleUp, RuntimeError):
    """Raised in a step when another run wrote the thread since this run's step began: going on
    would fork the thread and lose one of the two turns. Nothing of the step is kept; the turn
    can be sent again (it then starts from the thread's new head). A GraphBubbleUp, so that it
    ends the run as it is: a node error handler would route it on and write one more checkpoint,
    the forking write this error exists to prevent."""

    def __init__(self, thread_id: str, reason: str) -> None:
        super().__init__(
            f"thread {thread_id} was changed by another run while this turn ran; "
            f"send the message again ({reason})"
        )
        self.thread_id = thread_id
        self.reason = reason


class Row(NamedTuple):
    """A checkpoint as the guard reads it: ids and the metadata that says who wrote it."""

    id: str
    parent: str | None
    source: str | None
    run_id: str | None


def newest_checkpoints(saver: BaseCheckpointSaver, thread_id: str) -> list[Row]:
    """The thread's NEWEST newest root checkpoints: one indexed read of ids and metadata on SQLite,
    the saver's own `list` on any other."""
    if _is_sqlite(saver):
        return _sqlite_rows(saver, thread_id)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return [row_of(t) for t in saver.list(config, limit=NEWEST)]


SQLITE_NEWEST = (
    "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT ?"
)


def _is_sqlite(saver: BaseCheckpointSaver) -> bool:
    try:  # not every engine installs it (Aegra runs on PostgreSQL)
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        return False
    return isinstance(saver, SqliteSaver)


def _sqlite_rows(saver: Any, thread_id: str) -> list[Row]:
    with saver.cursor(transaction=False) as cursor:
        found = cursor.execute(SQLITE_NEWEST, (thread_id, NEWEST)).fetchall()
    rows = []
    for checkpoint_id, parent, metadata in found:
        meta = json.loads(metadata) if metadata else {}
        rows.append(Row(checkpoint_id, parent, meta.get("source"), _text(meta.get("run_id"))))
    return rows


def row_of(saved: CheckpointTuple) -> Row:
    meta = saved.metadata or {}
    parent_id = (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    checkpoint_id = saved.config["configurable"]["checkpoint_id"]
    return Row(checkpoint_id, parent_id, meta.get("source"), _text(meta.get("run_id")))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
