"""A thread's checkpoints as rows: ids, parents, turns, previews and the node that wrote each, read
with SQL from the checkpoint metadata and the writes' task paths; nothing is deserialised. Every id a
command is given is resolved here first."""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.db.base import CheckpointRecord, Database
from app.errors import NotFoundError, ThreadNotFoundError, UsageError
from app.service.threads import SHORT_ID_CHARS, checkpoint_time, short_id

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
        """An exact id, or — like git — a unique part of one of at least MIN_ID_CHARS characters:
        the start of the id, the start of its `short_id` (what `history` shows) or its end."""
        ref = ref.strip()
        if ref in self.by_id:
            return self.by_id[ref]
        if len(ref) < MIN_ID_CHARS:
            raise UsageError(
                f"checkpoint {ref!r} is too short to name one checkpoint: give at least "
                f"{MIN_ID_CHARS} characters of its id (the {SHORT_ID_CHARS} that `history` shows)"
            )
        matches = [r for r in self.rows if _names(r.checkpoint_id, ref)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            newest = matches[::-1][:8]
            shown = ", ".join(f"{short_id(r.checkpoint_id)} (turn {r.turn})" for r in newest)
            more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
            raise UsageError(
                f"checkpoint {ref!r} is ambiguous in thread {self.thread_id}: it matches "
                f"{shown}{more}; give more characters"
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


def _names(checkpoint_id: str, ref: str) -> bool:
    return (
        checkpoint_id.startswith(ref)
        or checkpoint_id.endswith(ref)
        or short_id(checkpoint_id).startswith(ref)
    )


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
