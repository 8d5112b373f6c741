"""Thread services over the checkpoint database: list threads (SQL only) and a thread's turn history."""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Unpack

from app.db.base import Database
from app.db.unreadable import SHAPE_ERRORS, UnreadableCheckpointError, unreadable

__all__ = ["unreadable"]  # with the services below

if TYPE_CHECKING:  # the graph machinery is not needed to list threads (`threads list` stays fast)
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore
    from langgraph.types import StateSnapshot

    from graphs.shared.skeleton import StrategyGraph

GREGORIAN_TO_UNIX_100NS = 0x01B21DD213814000
# LangGraph's checkpoint ids are time-ordered (UUIDv6): their first characters are shared by every
# checkpoint made about the same time, and their last 12 (the random node part) tell them apart.
SHORT_ID_CHARS = 12


def short_id(checkpoint_id: str) -> str:
    """The part of a checkpoint id that tables and hints show; `CheckpointIndex.resolve` takes it."""
    return checkpoint_id[-SHORT_ID_CHARS:]


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


def list_threads(database: Database, *, with_writers: bool = True) -> list[ThreadSummary]:
    """Every thread, newest first, read from checkpoint metadata without deserialising state; with
    `with_writers`, threads whose writer died mid-run are marked interrupted."""
    sizes = database.thread_sizes()
    dead = database.dead_writers() if with_writers else {}
    return [
        ThreadSummary(
            row.thread_id,
            row.title or "",
            row.turns or 0,
            row.checkpoints,
            checkpoint_time(row.last_checkpoint),
            size_bytes=sizes.get(row.thread_id, 0),
            interrupted=row.thread_id in dead,
        )
        for row in database.thread_rows()
    ]


def checkpoint_time(checkpoint_id: str) -> str:
    """LangGraph checkpoint ids are UUIDv6: their first 60 bits are the creation time."""
    value = uuid.UUID(checkpoint_id).int >> 64
    ticks = ((value >> 32) << 28) | (((value >> 16) & 0xFFFF) << 12) | (value & 0x0FFF)
    seconds = (ticks - GREGORIAN_TO_UNIX_100NS) / 10_000_000
    return datetime.fromtimestamp(seconds, UTC).astimezone().isoformat(timespec="seconds")


def thread_config(
    thread_id: str,
    checkpoint_id: str | None = None,
    *,
    root: bool = False,
    **extra: Unpack[RunnableConfig],
) -> RunnableConfig:
    """The config that names a thread (and a checkpoint of it): the one place it is written.
    `extra` adds top-level keys (metadata, recursion_limit). A checkpoint, or `root`, goes with the
    root namespace: LangGraph needs it to copy a thread's first checkpoint (it has no parent), and
    a saver lists only that namespace's checkpoints with it."""
    configurable = {"thread_id": thread_id}
    if checkpoint_id is not None or root:
        configurable["checkpoint_ns"] = ""
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable, **extra}


def saver_of(graph: StrategyGraph) -> BaseCheckpointSaver:
    """The saver of a thread's graph (`thread_graph` and `strategy_graph` always compile one in)."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    saver = graph.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):
        raise TypeError(f"the graph was compiled without a checkpoint saver ({saver!r})")
    return saver


def load_state(graph: StrategyGraph, thread_id: str) -> StateSnapshot:
    """The thread's head state, or a clear error when a checkpoint cannot be trusted or decoded."""
    from graphs.state import unreadable_reason

    with reading(thread_id, "head"):
        snapshot = graph.get_state(thread_config(thread_id))
    reason = unreadable_reason(snapshot.values)
    if reason:
        raise unreadable(thread_id, snapshot.config["configurable"].get("checkpoint_id"), reason)
    return snapshot


@contextlib.contextmanager
def reading(thread_id: str, checkpoint: str) -> Iterator[None]:
    """Loading a state: what the saver refused, or what LangGraph could not rebuild from what it
    read, is "checkpoint … is unreadable" (exit 3)."""
    try:
        yield
    except UnreadableCheckpointError as exc:
        raise unreadable(thread_id, exc.checkpoint_id or checkpoint, exc.reason) from exc
    except SHAPE_ERRORS as exc:
        raise unreadable(thread_id, checkpoint, f"{type(exc).__name__}: {exc}") from exc


def thread_exists(database: Database, thread_id: str) -> bool:
    return database.thread_exists(thread_id)


def thread_graph(checkpointer: BaseCheckpointSaver, thread_id: str) -> StrategyGraph:
    """The compiled graph of the thread's own strategy (react for a new thread), so its state
    fields (plan, lessons, …) and pending steps (`executor`, …) read as that strategy wrote them."""
    from graphs.strategies import stored_strategy

    return strategy_graph(stored_strategy(checkpointer, thread_id) or "react", checkpointer)


def strategy_graph(
    strategy: str, checkpointer: BaseCheckpointSaver, store: BaseStore | None = None
) -> StrategyGraph:
    """The strategy's graph on `checkpointer` and `store` (its nodes' `runtime.store`): compiled
    once per process (a few ms each time, in every `chat -m` and server request), then copied onto
    them, as `compile(checkpointer=, store=)` would set them and LangGraph's own `with_config`
    copies a compiled graph."""
    return _compiled(strategy).copy({"checkpointer": checkpointer, "store": store})


@functools.cache
def _compiled(strategy: str) -> StrategyGraph:
    from graphs.strategies import get_strategy

    return get_strategy(strategy).build(None)
