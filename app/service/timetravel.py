"""Time travel over a thread's checkpoints: rollback, fork, diff (ids are resolved by app/service/index.py).

Listing and id resolution read checkpoint rows and metadata with SQL; only the checkpoints a command
actually shows or restores are deserialised. Every id is validated before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.messages import AnyMessage
from langgraph.types import StateSnapshot

from app.db.base import Database
from app.errors import ConflictError
from app.service.index import CheckpointIndex, CheckpointRow
from app.service.threads import load_state, reading, thread_config, unreadable
from app.service.workspace_sync import WorkspaceReport, restore_workspace
from graphs.shared.skeleton import StrategyGraph
from graphs.state import unreadable_reason

COUNTERS = ("turn", "iteration", "retry_count", "status", "last_error")


def state_at(graph: StrategyGraph, thread_id: str, checkpoint_id: str) -> StateSnapshot:
    with reading(thread_id, checkpoint_id):
        snapshot = graph.get_state(thread_config(thread_id, checkpoint_id))
    reason = unreadable_reason(snapshot.values)
    if reason:
        raise unreadable(thread_id, checkpoint_id, reason)
    return snapshot


@dataclass
class RollbackReport:
    thread_id: str
    target: CheckpointRow
    previous_head: str
    undone_turns: list[tuple[int, str]]
    workspace: WorkspaceReport = field(default_factory=WorkspaceReport)
    pending: tuple[str, ...] = ()


def rollback_to(
    graph: StrategyGraph,
    index: CheckpointIndex,
    target: CheckpointRow,
    *,
    workspace: Path | None,
    force: bool = False,
) -> RollbackReport:
    """Make `target` the head again by copying it; nothing is deleted, so this can be undone too."""
    thread_id = index.thread_id
    head_state = load_state(graph, thread_id)
    target_state = state_at(graph, thread_id, target.checkpoint_id)
    kept_turns = {r.turn for r in index.branch(target.checkpoint_id)}
    undone = _turns_after(index, kept_turns)
    graph.update_state(
        thread_config(
            thread_id,
            target.checkpoint_id,
            metadata={
                "turn": target.turn,
                "preview": target.preview,
                "rollback_from": index.head.checkpoint_id,
            },
        ),
        None,
        as_node="__copy__",
    )
    report = RollbackReport(
        thread_id, target, index.head.checkpoint_id, undone, pending=tuple(target_state.next)
    )
    if workspace is not None:
        report.workspace = restore_workspace(
            workspace, _messages(head_state), _messages(target_state), force=force
        )
    return report


def _turns_after(index: CheckpointIndex, kept_turns: set) -> list[tuple[int, str]]:
    seen: dict[int, str] = {}
    for row in index.branch():
        if row.turn is not None and row.turn not in kept_turns and row.turn not in seen:
            seen[row.turn] = row.preview
    return sorted(seen.items())


def fork_at(
    graph: StrategyGraph,
    index: CheckpointIndex,
    source: CheckpointRow,
    new_thread_id: str,
    database: Database,
    *,
    workspace: Path | None,
    force: bool = False,
) -> WorkspaceReport:
    """A new thread whose state equals the source thread's state at `source`."""
    if database.thread_exists(new_thread_id):
        raise ConflictError(f"thread {new_thread_id} already exists; choose another id to fork to")
    snapshot = state_at(graph, index.thread_id, source.checkpoint_id)
    values = {k: v for k, v in snapshot.values.items() if v is not None}
    graph.update_state(
        thread_config(
            new_thread_id,
            metadata={
                "turn": source.turn,
                "preview": source.preview,
                "forked_from": {"thread": index.thread_id, "checkpoint": source.checkpoint_id},
            },
        ),
        values,
        as_node="finalize",
    )
    if workspace is None:
        return WorkspaceReport()
    head = load_state(graph, index.thread_id)
    return restore_workspace(workspace, _messages(head), _messages(snapshot), force=force)


@dataclass(frozen=True)
class StateDiff:
    added: list[AnyMessage]
    removed: list[AnyMessage]
    counters: dict[str, tuple[object, object]]

    def as_dict(self) -> dict:
        from app.service.events import message_dict

        return {
            "added": [message_dict(m) for m in self.added],
            "removed": [message_dict(m) for m in self.removed],
            "counters": {k: {"from": a, "to": b} for k, (a, b) in self.counters.items()},
        }


def diff_states(before: dict, after: dict) -> StateDiff:
    """Messages added and removed (by id) and counters that changed, from `before` to `after`."""
    old, new = _messages_by_id(before), _messages_by_id(after)
    added = [m for key, m in new.items() if key not in old or old[key] != m]
    removed = [m for key, m in old.items() if key not in new or new[key] != m]
    counters = {
        key: (before.get(key), after.get(key))
        for key in COUNTERS
        if before.get(key) != after.get(key)
    }
    return StateDiff(added, removed, counters)


def _messages_by_id(values: dict) -> dict[str, AnyMessage]:
    return {m.id or f"#{i}": m for i, m in enumerate(values.get("messages", []))}


def _messages(snapshot: StateSnapshot) -> list[AnyMessage]:
    return snapshot.values.get("messages", [])
