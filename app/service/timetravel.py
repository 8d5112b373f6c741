"""Time travel over a thread's checkpoints: index and resolve ids, rollback, fork, diff.

Listing and id resolution read checkpoint rows and metadata with SQL; only the checkpoints a command
actually shows or restores are deserialised. Every id is validated before anything is written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from app.db.base import CheckpointRecord, Database
from app.errors import ConflictError, NotFoundError, ThreadNotFoundError, UsageError
from app.service.outcome import turn_status
from app.service.threads import (
    SHORT_ID_CHARS,
    checkpoint_time,
    load_state,
    reading,
    short_id,
    thread_config,
    unreadable,
)
from app.service.workspace_sync import WorkspaceReport, restore_workspace
from graphs.shared.messages import current_turn
from graphs.state import unreadable_reason

COUNTERS = ("turn", "iteration", "retry_count", "status", "last_error")
MIN_ID_CHARS = 6


@dataclass(frozen=True)
class CheckpointRow:
    checkpoint_id: str
    parent_id: str | None
    step: int
    source: str
    turn: int | None
    preview: str
    node: str
    note: str = ""

    @property
    def created_at(self) -> str:
        return checkpoint_time(self.checkpoint_id)

    def as_dict(self) -> dict:
        return {
            "checkpoint_id": self.checkpoint_id,
            "parent_id": self.parent_id,
            "step": self.step,
            "source": self.source,
            "turn": self.turn,
            "node": self.node,
            "preview": self.preview,
            "note": self.note,
            "created_at": self.created_at,
        }


class CheckpointIndex:
    """Every checkpoint of one thread (root namespace) with its parent, turn and writer node."""

    def __init__(self, database: Database, thread_id: str) -> None:
        if not database.thread_exists(thread_id):
            raise ThreadNotFoundError(thread_id)
        self.thread_id = thread_id
        writers = _writer_nodes(database, thread_id)
        records = database.checkpoint_records(thread_id)
        self.rows = _inherit_turns([_row(record, writers) for record in records])
        self.by_id = {row.checkpoint_id: row for row in self.rows}

    @property
    def head(self) -> CheckpointRow:
        return self.rows[-1]

    def resolve(self, ref: str) -> CheckpointRow:
        """An exact id, or a unique prefix or suffix of one (`history` prints the `short_id`)."""
        ref = ref.strip()
        if ref in self.by_id:
            return self.by_id[ref]
        if len(ref) < MIN_ID_CHARS:
            raise UsageError(
                f"checkpoint {ref!r} is too short to name one checkpoint: give at least "
                f"{MIN_ID_CHARS} characters of its id (the {SHORT_ID_CHARS} that `history` shows)"
            )
        matches = [
            r for r in self.rows if r.checkpoint_id.startswith(ref) or r.checkpoint_id.endswith(ref)
        ]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise UsageError(
                f"checkpoint {ref!r} is ambiguous in thread {self.thread_id} "
                f"({len(matches)} match); give more characters"
            )
        raise NotFoundError(
            f"checkpoint {ref!r} does not exist in thread {self.thread_id}; "
            f"list them with: waypoint history --thread {self.thread_id} --all"
        )

    def branch(self, tip: str | None = None) -> list[CheckpointRow]:
        """The chain from the root to `tip` (default: the head), oldest first."""
        chain = []
        current = self.by_id.get(tip or self.head.checkpoint_id)
        while current is not None:
            chain.append(current)
            current = self.by_id.get(current.parent_id) if current.parent_id else None
        return chain[::-1]

    def children(self) -> dict[str | None, list[CheckpointRow]]:
        children: dict[str | None, list[CheckpointRow]] = {}
        for row in self.rows:
            children.setdefault(row.parent_id if row.parent_id in self.by_id else None, []).append(
                row
            )
        return children

    def end_of_turn(self, turn: int) -> CheckpointRow:
        """The last checkpoint of `turn` on the current branch."""
        rows = [r for r in self.branch() if r.turn == turn]
        if not rows:
            raise UsageError(f"thread {self.thread_id} has no turn {turn} on its current branch")
        return rows[-1]


def _row(record: CheckpointRecord, writers: dict[str, str]) -> CheckpointRow:
    metadata, parent = record.metadata, record.parent_id
    node = writers.get(parent or "", "") if metadata.get("source") == "loop" else ""
    return CheckpointRow(
        checkpoint_id=record.checkpoint_id,
        parent_id=parent,
        step=int(metadata.get("step", 0)),
        source=str(metadata.get("source", "")),
        turn=metadata.get("turn"),
        preview=str(metadata.get("preview", "")),
        node=node
        or {"input": "input", "update": "update", "fork": "copy"}.get(
            str(metadata.get("source")), ""
        ),
        note=_note(metadata),
    )


def _inherit_turns(rows: list[CheckpointRow]) -> list[CheckpointRow]:
    """A rollback copy carries no run metadata: it belongs to the turn of the checkpoint before it."""
    by_id: dict[str, CheckpointRow] = {}
    result = []
    for row in rows:  # oldest first, so a parent is always seen before its children
        parent = by_id.get(row.parent_id or "")
        if row.turn is None and parent is not None:
            note = row.note or ("rollback" if row.source == "fork" else "")
            row = replace(row, turn=parent.turn, preview=parent.preview, note=note)
        by_id[row.checkpoint_id] = row
        result.append(row)
    return result


def _note(metadata: dict) -> str:
    if "rollback_from" in metadata:
        return "rollback"
    if "replay_of" in metadata:
        return "replay"
    if "forked_from" in metadata:
        source = metadata["forked_from"]
        return f"fork of {source.get('thread')}@{short_id(str(source.get('checkpoint')))}"
    # A turn closed after Ctrl-C, a cancel or a crash ends with status `cancelled`, as `history` says.
    return "cancelled" if "closed" in metadata else ""


def _writer_nodes(database: Database, thread_id: str) -> dict[str, str]:
    """checkpoint id → the node whose writes, stored under it, produced its child checkpoint."""
    writers: dict[str, str] = {}
    for checkpoint_id, task_path in sorted(database.writer_paths(thread_id)):
        name = task_path.rsplit(",", 1)[-1].strip()
        if name and name != "__start__":
            writers[checkpoint_id] = ", ".join(filter(None, [writers.get(checkpoint_id), name]))
    return writers


def state_at(graph: CompiledStateGraph, thread_id: str, checkpoint_id: str) -> StateSnapshot:
    with reading(thread_id, checkpoint_id):
        snapshot = graph.get_state(thread_config(thread_id, checkpoint_id))
    reason = unreadable_reason(snapshot.values)
    if reason:
        raise unreadable(thread_id, checkpoint_id, reason)
    return snapshot


@dataclass(frozen=True)
class TurnSummary:
    turn: int
    preview: str
    status: str
    steps: int
    iteration: int
    retry_count: int
    tools: list[str]
    checkpoint_id: str
    updated_at: str

    def as_dict(self) -> dict:
        return asdict(self)


def turn_history(
    graph: CompiledStateGraph, index: CheckpointIndex, limit: int | None = None
) -> list[TurnSummary]:
    """The turns on the current branch, newest first. Rows come from the index; only the last
    checkpoint of each turn shown is deserialised, so the first page is cheap on any thread."""
    groups: dict[int, list[CheckpointRow]] = {}
    for row in index.branch():
        if row.turn is not None:
            groups.setdefault(row.turn, []).append(row)
    turns = sorted(groups, reverse=True)[:limit]
    return [_summarise(graph, index.thread_id, turn, groups[turn]) for turn in turns]


def _summarise(
    graph: CompiledStateGraph, thread_id: str, turn: int, rows: list[CheckpointRow]
) -> TurnSummary:
    last = rows[-1]
    snapshot = state_at(graph, thread_id, last.checkpoint_id)
    values = snapshot.values
    tools = [
        call["name"]
        for message in current_turn(values.get("messages", []))
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    ]
    return TurnSummary(
        turn=turn,
        preview=next((r.preview for r in rows if r.preview), ""),
        status=turn_status(values) if values.get("status") or not snapshot.next else "interrupted",
        steps=len(rows),
        iteration=values.get("iteration", 0),
        retry_count=values.get("retry_count", 0),
        tools=tools,
        checkpoint_id=last.checkpoint_id,
        updated_at=last.created_at,
    )


@dataclass
class RollbackReport:
    thread_id: str
    target: CheckpointRow
    previous_head: str
    undone_turns: list[tuple[int, str]]
    workspace: WorkspaceReport = field(default_factory=WorkspaceReport)
    pending: tuple[str, ...] = ()


def rollback_to(
    graph: CompiledStateGraph,
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
    graph: CompiledStateGraph,
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
