"""The thread's newest checkpoints as the one-writer rule reads them (graphs/shared/guard.py), and the
error it raises: one indexed read of ids and metadata on SQLite and PostgreSQL, the saver's own
`list` on any other saver."""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.errors import GraphBubbleUp

NEWEST = 3  # a step's checkpoint, its parent and the one before: the links a step can have forked


class ThreadChangedError(GraphBubbleUp, RuntimeError):
    """Raised before a node runs, or as a checkpoint is stored, when another run wrote the thread
    since this run's step began: going on would fork the thread and lose one of the two turns.
    Nothing of the step is kept; the turn can be sent again (it then starts from the thread's new
    head). A GraphBubbleUp, so that it ends the run as it is: a node error handler would route it
    on and write one more checkpoint, the forking write this error exists to prevent."""

    def __init__(self, thread_id: str, reason: str, turn_checkpoint: str | None = None) -> None:
        super().__init__(
            f"thread {thread_id} was changed by another run while this turn ran; "
            f"send the message again ({reason})"
        )
        self.thread_id = thread_id
        self.reason = reason
        # The checkpoint of this run's turn the refused step followed; None when the run was
        # refused before it stored its turn. Whether the other run carried that turn on, answered,
        # is read from it (graphs/shared/carried_turns.py).
        self.turn_checkpoint = turn_checkpoint

    def __reduce__(self) -> tuple:  # pickles (engines may) and back
        return type(self), (self.thread_id, self.reason, self.turn_checkpoint)


class Row(NamedTuple):
    """A checkpoint as the guard reads it: ids and the metadata that says who wrote it."""

    id: str
    parent: str | None
    source: str | None
    run_id: str | None


def newest_checkpoints(saver: BaseCheckpointSaver, thread_id: str) -> list[Row]:
    """The thread's NEWEST newest root checkpoints, newest first: one indexed read of ids and
    metadata on SQLite and PostgreSQL, the saver's own `list` (whole checkpoints) on any other."""
    kind = saver_kind(saver)
    # The ignores below: `saver_kind` names the concrete saver, whose own methods are used.
    if kind == "sqlite":
        with saver.cursor(transaction=False) as cursor:  # type: ignore[attr-defined]
            return rows_from_sql(cursor.execute(SQLITE_NEWEST, (thread_id, NEWEST)).fetchall())
    if kind == "postgres":
        with saver._cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute(POSTGRES_NEWEST, (thread_id, NEWEST))
            return rows_from_sql(cursor.fetchall())
    if kind == "async-postgres":  # a sync node runs in a worker thread, never on the saver's loop
        reading = anewest_checkpoints(saver, thread_id)
        return asyncio.run_coroutine_threadsafe(reading, saver.loop).result()  # type: ignore[attr-defined]
    return [row_of(t) for t in saver.list(_thread(thread_id), limit=NEWEST)]


async def anewest_checkpoints(saver: BaseCheckpointSaver, thread_id: str) -> list[Row]:
    """`newest_checkpoints` for a caller on the saver's event loop."""
    if saver_kind(saver) == "async-postgres":  # the ignore: an AsyncPostgresSaver's own cursor
        async with saver._cursor() as cursor:  # type: ignore[attr-defined]
            await cursor.execute(POSTGRES_NEWEST, (thread_id, NEWEST))
            return rows_from_sql(await cursor.fetchall())
    return [row_of(t) async for t in saver.alist(_thread(thread_id), limit=NEWEST)]


SQLITE_NEWEST = (
    "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT ?"
)
POSTGRES_NEWEST = (
    "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
    "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT %s"
)


def saver_kind(saver: BaseCheckpointSaver) -> str | None:
    """Which of LangGraph's SQL savers `saver` is, if any (each package is optional: Aegra runs
    on PostgreSQL alone, `langgraph dev` keeps checkpoints in memory)."""
    saver_class: type = type(saver)  # a plain `type`: mypy finds a saver class unhashable
    return _kind_of(saver_class)


@functools.lru_cache(maxsize=64)
def _kind_of(saver_class: type) -> str | None:
    kinds = [
        ("sqlite", "langgraph.checkpoint.sqlite", "SqliteSaver"),
        ("postgres", "langgraph.checkpoint.postgres", "PostgresSaver"),
        ("async-postgres", "langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver"),
    ]
    for kind, module, name in kinds:
        try:
            known = getattr(importlib.import_module(module), name)
        except ImportError:  # a failed import is slow: the answer is kept per class
            continue
        if issubclass(saver_class, known):
            return kind
    return None


def rows_from_sql(found: Sequence[Any]) -> list[Row]:
    """Rows of SQLITE_NEWEST or POSTGRES_NEWEST (tuples, or dicts from the savers' connections)."""
    rows = []
    for found_row in found:
        checkpoint_id, parent, metadata = (
            (found_row["checkpoint_id"], found_row["parent_checkpoint_id"], found_row["metadata"])
            if isinstance(found_row, dict)
            else found_row
        )
        meta = json.loads(metadata) if isinstance(metadata, str | bytes) else (metadata or {})
        rows.append(Row(checkpoint_id, parent, meta.get("source"), _text(meta.get("run_id"))))
    return rows


def _thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def row_of(saved: CheckpointTuple) -> Row:
    meta = saved.metadata or {}
    parent_id = (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    checkpoint_id = saved.config["configurable"]["checkpoint_id"]
    return Row(checkpoint_id, parent_id, meta.get("source"), _text(meta.get("run_id")))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
