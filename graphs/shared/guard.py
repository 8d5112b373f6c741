"""One writer per thread, kept by the graph itself: every step checks, before and after its node
runs, that no other run wrote the thread meanwhile, so an engine that runs two turns on one thread
at once (Aegra 0.11) fails one of them with `ThreadChangedError` instead of forking the history.

The thread's newest checkpoints are a linear history when each one written by this run follows the
one written just before it (its parent). Deliberate branches start from an explicit checkpoint
(replay, a client's `checkpoint_id`): the link from that checkpoint is not a fork."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER  # the run's own saver
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import get_runtime

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


class Step(NamedTuple):
    """What the guard knows of the running step."""

    thread_id: str
    checkpoint_id: str  # the checkpoint the step runs from
    run_id: str | None  # the run's id, when its engine gave one (LangGraph's servers, Aegra)
    start: str | None  # the checkpoint the run was explicitly started from (a deliberate branch)


def one_writer(node: Callable[..., Any]) -> Callable[..., Any]:
    """`node`, refused when the thread changed under its step: checked before it runs (no work
    is wasted) and after (its update is dropped rather than written over another run's)."""

    @functools.wraps(node)  # LangGraph reads the node's signature (does it take a runtime?)
    def guarded(state: Any, *args: Any, **kwargs: Any) -> Any:
        check_thread()
        update = node(state, *args, **kwargs)
        check_thread()
        return update

    return guarded


def check_thread() -> None:
    """Raise ThreadChangedError if the running step's thread was changed by another run."""
    config = get_config()
    step, saver = running_step(config), config["configurable"].get(CONFIG_KEY_CHECKPOINTER)
    if step is None or not isinstance(saver, BaseCheckpointSaver):
        return
    reason = fork_reason(newest_checkpoints(saver, step.thread_id), step)
    if reason is not None:
        raise ThreadChangedError(step.thread_id, reason)


def running_step(config: RunnableConfig) -> Step | None:
    """The step of the root graph being run, or None (no checkpointer; a subgraph's step, which
    its parent graph's step guards)."""
    info = get_runtime().execution_info
    if info is None or info.thread_id is None or "|" in info.checkpoint_ns:
        return None
    metadata = config.get("metadata") or {}
    run_id = info.run_id or metadata.get("run_id")
    start = metadata.get("checkpoint_id")
    return Step(info.thread_id, info.checkpoint_id, _text(run_id), _text(start))


def fork_reason(rows: Sequence[Row], step: Step) -> str | None:
    """Why the thread's newest checkpoints (newest first, at most NEWEST) show that `step` would
    fork it, or None. A checkpoint newer than the step's own was written by another run; a
    checkpoint this run wrote whose parent is not the one written just before it started from a
    head another run had already moved."""
    if rows and rows[0].id > step.checkpoint_id:
        return f"checkpoint {rows[0].id} was written after {step.checkpoint_id}"
    links = list(zip(rows, [*rows[1:], None], strict=True))
    if len(rows) == NEWEST:  # the oldest row read: the one written before it is unknown
        links.pop()
    for row, before in links:
        if not _written_by(step, row, rows):
            break
        expected = before.id if before else None
        deliberate = step.start is not None and row.parent == step.start
        if row.parent != expected and not deliberate:
            return f"checkpoint {row.id} follows {row.parent}, but {expected} was written between"
    return None


def _written_by(step: Step, row: Row, rows: Sequence[Row]) -> bool:
    """Whether this run wrote `row`. With run ids (servers), exact. Without, the step's own
    checkpoint when a step wrote it, and the input checkpoint right under it: a run started on a
    thread another run left behind does not answer for that run's links."""
    if step.run_id is not None and row.run_id is not None:
        return row.run_id == step.run_id
    if row.id == step.checkpoint_id:
        return row.source == "loop"
    head = rows[0]
    return row.source == "input" and head.id == step.checkpoint_id and head.parent == row.id


def newest_checkpoints(saver: BaseCheckpointSaver, thread_id: str) -> list[Row]:
    """The thread's NEWEST newest root checkpoints: one indexed read of ids and metadata on SQLite,
    the saver's own `list` on any other."""
    if _is_sqlite(saver):
        return _sqlite_rows(saver, thread_id)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return [_row(t.config, t.parent_config, t.metadata) for t in saver.list(config, limit=NEWEST)]


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


def _row(config: RunnableConfig, parent: RunnableConfig | None, metadata: Any) -> Row:
    meta = metadata or {}
    parent_id = (parent or {}).get("configurable", {}).get("checkpoint_id")
    checkpoint_id = config["configurable"]["checkpoint_id"]
    return Row(checkpoint_id, parent_id, meta.get("source"), _text(meta.get("run_id")))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
