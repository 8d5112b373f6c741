"""One writer per thread, kept by the graph itself: every step checks, before its node runs, that no
other run wrote the thread meanwhile, and every checkpoint is checked again as it is stored
(graphs/shared/guarded_writes.py), so an engine that runs two turns on one thread at once (Aegra
0.11) fails one of them with `ThreadChangedError` instead of forking the history.

The thread's newest checkpoints are a linear history when each one written by this run follows the
one written just before it (its parent). Deliberate branches start from an explicit checkpoint
(replay, a client's `checkpoint_id`): the link from that checkpoint is not a fork."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER  # the run's own saver
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.runtime import get_runtime

from graphs.shared.guard_rows import NEWEST, Row, ThreadChangedError, newest_checkpoints
from graphs.shared.guarded_writes import guard_writes


class Step(NamedTuple):
    """What the guard knows of the running step."""

    thread_id: str
    checkpoint_id: str  # the checkpoint the step runs from
    run_id: str | None  # the run's id, when its engine gave one (LangGraph's servers, Aegra)
    start: str | None  # the checkpoint the run was explicitly started from (a deliberate branch)


def one_writer(node: Callable[..., Any]) -> Callable[..., Any]:
    """`node`, refused before it runs (no model call or side effect is spent) when another run
    changed the thread; what it writes is checked again as it is stored (guarded_writes)."""

    @functools.wraps(node)  # LangGraph reads the node's signature (does it take a runtime?)
    def guarded(state: Any, *args: Any, **kwargs: Any) -> Any:
        check_thread()
        return node(state, *args, **kwargs)

    return guarded


def check_thread() -> None:
    """Raise ThreadChangedError if the running step's thread was changed by another run."""
    config = get_config()
    step, saver = running_step(config), config["configurable"].get(CONFIG_KEY_CHECKPOINTER)
    if step is None or not isinstance(saver, BaseCheckpointSaver):
        return
    guard_writes(saver)
    reason = fork_reason(newest_checkpoints(saver, step.thread_id), step)
    if reason is not None:
        raise ThreadChangedError(step.thread_id, reason, step.checkpoint_id)


def running_step(config: RunnableConfig) -> Step | None:
    """The step of the root graph being run, or None (no checkpointer; a subgraph's step, which
    its parent graph's step guards)."""
    thread_id, checkpoint_id, namespace, run_id = _execution(config)
    if thread_id is None or checkpoint_id is None or "|" in namespace:
        return None
    metadata = config.get("metadata") or {}
    run_id = run_id or metadata.get("run_id")
    start = metadata.get("checkpoint_id")
    return Step(str(thread_id), checkpoint_id, _text(run_id), _text(start))


def _execution(config: RunnableConfig) -> tuple[Any, str | None, str, Any]:
    """(thread, the step's checkpoint, the task's namespace, run id): from the runtime's
    execution info, or, with a LangGraph that has none, from the task's config."""
    info = getattr(get_runtime(), "execution_info", None)
    if info is not None:
        return info.thread_id, info.checkpoint_id, info.checkpoint_ns, info.run_id
    configurable = config.get("configurable") or {}
    checkpoints = configurable.get("checkpoint_map") or {}
    namespace = configurable.get("checkpoint_ns") or ""
    return configurable.get("thread_id"), checkpoints.get(""), namespace, config.get("run_id")


def fork_reason(rows: Sequence[Row], step: Step) -> str | None:
    """Why the thread's newest checkpoints (newest first, at most NEWEST) show that `step` would
    fork it, or None. A checkpoint newer than the step's own was written by another run; a
    checkpoint this run wrote whose parent is not the one written just before it started from a
    head another run had already moved."""
    if not rows:  # nothing stored yet (an engine that saves checkpoints behind the run)
        return None
    if rows[0].id > step.checkpoint_id:
        return f"checkpoint {rows[0].id} was written after {step.checkpoint_id}"
    links = list(zip(rows, [*rows[1:], None], strict=True))
    if len(rows) == NEWEST:  # the oldest row read: the one written before it is unknown
        links.pop()
    for row, before in links:
        if not _written_by(step, row, rows):
            break
        if row.source == "fork":  # a branch made on purpose (a replay's copy): it starts here
            return None
        expected = before.id if before else None
        deliberate = step.start is not None and row.parent == step.start
        if row.parent != expected and not deliberate:
            return f"checkpoint {row.id} follows {row.parent}, but {expected} was written between"
    return None


def _written_by(step: Step, row: Row, rows: Sequence[Row]) -> bool:
    """Whether this run wrote `row`. With run ids (servers), exact. Without, only at a turn's first
    step: its checkpoint and the input checkpoint right under it, which LangGraph stores before any
    node runs (later ones are checked as they are stored, guarded_writes). A run resumed on a head
    another run left does not answer for that run's links."""
    if step.run_id is not None and row.run_id is not None:
        return row.run_id == step.run_id
    first_step = (
        len(rows) > 1
        and rows[0].id == step.checkpoint_id
        and rows[0].parent == rows[1].id
        and rows[1].source == "input"
    )
    return first_step and row in rows[:2]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
