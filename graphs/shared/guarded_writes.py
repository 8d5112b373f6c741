"""The other half of the one-writer rule (graphs/shared/guard.py): the run's own saver refuses to store
a checkpoint that would fork its thread, i.e. one whose parent is no longer the thread's newest.
The check and the write hold the thread's writer lock (graphs/shared/writer_locks.py): no other run
in the process, nor on PostgreSQL in any process, can store a checkpoint of the thread between them.

LangGraph offers no hook before a checkpoint is stored, so the check is installed on the saver object
an engine hands the run (`put` and `aput`), once: by a guarded step, or earlier, when a server copies
a graph of `guard_copies` with its checkpointer; the saver is otherwise unchanged."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_RUNTIME  # in a run's config only
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from graphs.shared.guard_rows import (
    Row,
    ThreadChangedError,
    anewest_checkpoints,
    newest_checkpoints,
)
from graphs.shared.live import RunContext
from graphs.shared.writer_locks import WriterLocks

INSTALLED = "_waypoint_one_writer"
DELIBERATE = frozenset({"update", "fork"})  # state edits, copies (rollback) and replays


def guard_writes(saver: BaseCheckpointSaver) -> None:
    """From now on `saver` refuses (ThreadChangedError) a root checkpoint that would fork its
    thread; the run that asked to store it fails, and the thread keeps the other run's turn."""
    if not hasattr(saver, "__dict__") or saver.__dict__.get(INSTALLED):
        return  # (a saver with __slots__ keeps only the check before each node)
    with _installing:  # once: a second wrapper would take the thread's lock again, and fail
        if not saver.__dict__.get(INSTALLED):
            _install(saver)


_installing = threading.Lock()


class GuardedCopies(CompiledStateGraph[Any, RunContext, Any, Any]):
    """A compiled graph whose copies made with a checkpointer have the check installed on it. That
    is how Aegra and LangGraph's server hand a graph their saver, per run: installed there, the
    check also covers the first checkpoints of a process's first run, which LangGraph stores
    before any node (and so any node's check) runs."""

    def copy(self, update: dict[str, Any] | None = None) -> GuardedCopies:
        saver = (update or {}).get("checkpointer")
        if isinstance(saver, BaseCheckpointSaver):
            guard_writes(saver)
        return super().copy(update)


def guard_copies(graph: CompiledStateGraph[Any, RunContext, Any, Any]) -> GuardedCopies:
    """`graph` as a GuardedCopies (the same graph: built as `copy` builds one)."""
    attributes = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
    return GuardedCopies(**attributes)


def _install(saver: BaseCheckpointSaver) -> None:
    put, aput = saver.put, saver.aput
    locks = WriterLocks(saver)

    def checked_put(config: RunnableConfig, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        thread_id = _root_thread(config, metadata)
        if thread_id is None:
            return put(config, checkpoint, metadata, versions)
        with locks.writing(thread_id) as rows:
            if rows is None:  # not read with the lock
                rows = newest_checkpoints(saver, thread_id)
            refuse_fork(rows, config, checkpoint["id"])
            return put(config, checkpoint, metadata, versions)

    async def checked_aput(
        config: RunnableConfig, checkpoint: Any, metadata: Any, versions: Any
    ) -> Any:
        thread_id = _root_thread(config, metadata)
        if thread_id is None:
            return await aput(config, checkpoint, metadata, versions)
        async with locks.awriting(thread_id) as rows:
            if rows is None:
                rows = await anewest_checkpoints(saver, thread_id)
            refuse_fork(rows, config, checkpoint["id"])
            return await aput(config, checkpoint, metadata, versions)

    # On this saver instance only; the checked versions take the same arguments, typed loosely.
    saver.put, saver.aput = checked_put, checked_aput  # type: ignore[method-assign, assignment]
    saver.__dict__[INSTALLED] = True


def refuse_fork(rows: Sequence[Row], config: RunnableConfig, checkpoint_id: str) -> None:
    """Raise ThreadChangedError unless the checkpoint about to be stored follows the thread's
    newest one (its own earlier copy aside), or starts the branch its run was asked to start."""
    parent = config["configurable"].get("checkpoint_id")
    newest = next((row.id for row in rows if row.id != checkpoint_id), None)
    start = (config.get("metadata") or {}).get("checkpoint_id")
    if parent == newest or (start is not None and parent == start):
        return
    thread_id = str(config["configurable"]["thread_id"])
    raise ThreadChangedError(
        thread_id, f"checkpoint {checkpoint_id} would follow {parent}, but {newest} is newer"
    )


def _root_thread(config: RunnableConfig, metadata: Any) -> str | None:
    """The thread of a checkpoint the rule applies to: a root graph's, written by a run (whose
    config carries its runtime; an application's own writes, such as an import, do not)."""
    configurable = config.get("configurable") or {}
    if CONFIG_KEY_RUNTIME not in configurable or configurable.get("checkpoint_ns"):
        return None
    if (metadata or {}).get("source") in DELIBERATE:
        return None
    thread_id = configurable.get("thread_id")
    return None if thread_id is None else str(thread_id)
