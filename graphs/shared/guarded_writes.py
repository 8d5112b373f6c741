"""The other half of the one-writer rule (graphs/shared/guard.py): the run's own saver refuses to store
a checkpoint that would fork its thread, i.e. one whose parent is no longer the thread's newest.
The check and the write hold the thread's writer lock (graphs/shared/writer_locks.py): no other run
in the process, nor on PostgreSQL in any process, can store a checkpoint of the thread between them.

LangGraph offers no hook before a checkpoint is stored, so the check is installed on the saver object
an engine hands the run (`put` and `aput`), once: by a guarded step, or earlier, when a server copies
a graph of `guard_copies` with its checkpointer; the saver is otherwise unchanged."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_RUNTIME  # in a run's config only
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from graphs.shared.carried_turns import carried_on, head_config, turn_config
from graphs.shared.guard_rows import (
    Row,
    ThreadChangedError,
    anewest_checkpoints,
    newest_checkpoints,
)
from graphs.shared.live import RunContext
from graphs.shared.writer_locks import WriterLocks

log = logging.getLogger(__name__)

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
    before any node (and so any node's check) runs. A run refused after another run carried its
    turn on, answered, ends as answered instead of failing."""

    def copy(self, update: dict[str, Any] | None = None) -> GuardedCopies:
        saver = (update or {}).get("checkpointer")
        if isinstance(saver, BaseCheckpointSaver):
            guard_writes(saver)
        return super().copy(update)

    # A run (invoke, stream, astream_events: each goes through these) refused after another run
    # carried its turn on, answered, ends as answered (graphs/shared/carried_turns.py).
    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        try:
            yield from super().stream(input, config, **kwargs)
        except ThreadChangedError as refused:
            turn = turn_config(refused, config)
            if turn is None or not self._answered(turn, head_config(refused)):
                raise
            _ended_as_answered(refused)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        # Closed with this stream (a cancelled run), as a server closes LangGraph's own; typed an
        # AsyncIterator, it is an async generator.
        own = cast(AsyncGenerator[Any, None], super().astream(input, config, **kwargs))
        try:
            async with contextlib.aclosing(own) as chunks:
                async for chunk in chunks:
                    yield chunk
        except ThreadChangedError as refused:
            turn = turn_config(refused, config)
            if turn is None or not await self._aanswered(turn, head_config(refused)):
                raise
            _ended_as_answered(refused)

    def _answered(self, turn: RunnableConfig, head: RunnableConfig) -> bool:
        try:
            then, now = self.get_state(turn), self.get_state(head)
        except Exception:  # unread, the refusal stands: its client sends the turn again
            log.warning("the thread of a refused run could not be read", exc_info=True)
            return False
        return carried_on(then, now)

    async def _aanswered(self, turn: RunnableConfig, head: RunnableConfig) -> bool:
        try:
            then, now = await self.aget_state(turn), await self.aget_state(head)
        except Exception:  # unread, the refusal stands: its client sends the turn again
            log.warning("the thread of a refused run could not be read", exc_info=True)
            return False
        return carried_on(then, now)


def _ended_as_answered(refused: ThreadChangedError) -> None:
    log.info(
        "thread %s: a run refused after another run carried its turn on, answered (%s); "
        "it ends as answered",
        refused.thread_id,
        refused.reason,
    )


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
        with _naming_the_turn(config, metadata), locks.writing(thread_id) as rows:
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
        with _naming_the_turn(config, metadata):
            async with locks.awriting(thread_id) as rows:
                if rows is None:
                    rows = await anewest_checkpoints(saver, thread_id)
                refuse_fork(rows, config, checkpoint["id"])
                return await aput(config, checkpoint, metadata, versions)

    # On this saver instance only; the checked versions take the same arguments, typed loosely.
    saver.put, saver.aput = checked_put, checked_aput  # type: ignore[method-assign, assignment]
    saver.__dict__[INSTALLED] = True


@contextlib.contextmanager
def _naming_the_turn(config: RunnableConfig, metadata: Any) -> Iterator[None]:
    """A refused step's checkpoint names the run's turn it followed (a run's input checkpoint
    follows the thread's head: the run's turn is not stored yet)."""
    try:
        yield
    except ThreadChangedError as refused:
        if refused.turn_checkpoint is None and (metadata or {}).get("source") == "loop":
            refused.turn_checkpoint = config["configurable"].get("checkpoint_id")
        raise


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
