"""A thread's turns as `history` shows them, read from the stored rows without LangGraph or LangChain.

The turns come from the checkpoint index (SQL). For each turn shown, the state at its last checkpoint
is read as data (app/db/raw.py): the channel values stored in that checkpoint, and the messages,
rebuilt as LangGraph's DeltaChannel rebuilds them (a stored snapshot, then the writes stored under
each checkpoint since, merged as `add_messages` merges them). The head is checked as any load checks
it, so an unreadable head is an error, not a partial listing. Same result as loading each state
through the graph (tests/test_history.py compares them), at a fraction of the start-up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from app.db import raw
from app.db.base import Database
from app.db.unreadable import UnreadableCheckpointError, unreadable
from app.service.index import CheckpointIndex, CheckpointRow
from app.service.outcome import ToolResult, is_success, settled_status, unrecovered
from app.service.threads import reading
from app.store import validate_thread_id
from graphs import field_types

MESSAGES = "messages"
REMOVE_ALL = "__remove_all__"  # langgraph.graph.message.REMOVE_ALL_MESSAGES
START = "__start__"
TRIGGER = "branch:to:"  # a StateGraph node runs when its channel holds a newer version than it saw
# Writes that say what happened to a task rather than what it wrote (langgraph.constants).
CONTROL_CHANNELS = frozenset({"__error__", "__interrupt__", "__resume__", "__scheduled__"})


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
    success: bool  # the turn answered what was asked (app/service/outcome.py, `is_success`)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class History:
    """A thread's turns on its current branch (newest first, at most the limit asked for), and
    every checkpoint of the thread (oldest first) with the ids on the current branch."""

    index: CheckpointIndex
    turns: list[TurnSummary]
    total_turns: int
    on_branch: frozenset[str]

    @property
    def head(self) -> CheckpointRow:
        return self.index.head


def history(database: Database, thread_id: str, limit: int | None = None) -> History:
    index = CheckpointIndex(database, validate_thread_id(thread_id))
    branch = index.branch()
    groups: dict[int, list[CheckpointRow]] = {}
    for row in branch:
        if row.turn is not None:
            groups.setdefault(row.turn, []).append(row)
    shown = sorted(groups, reverse=True)[:limit]
    head = index.head.checkpoint_id
    states = StoredStates(
        database, thread_id, branch, {head, *(groups[t][-1].checkpoint_id for t in shown)}
    )
    states.check_head(head)
    return History(
        index,
        [_summarise(turn, groups[turn], states) for turn in shown],
        len(groups),
        frozenset(row.checkpoint_id for row in branch),
    )


def _summarise(turn: int, rows: list[CheckpointRow], states: StoredStates) -> TurnSummary:
    last = rows[-1]
    values = states.values(last.checkpoint_id)
    tools = [
        call["name"]
        for message in current_turn(values[MESSAGES])
        if message.name in ("AIMessage", "AIMessageChunk")
        for call in message.fields.get("tool_calls") or []
        if isinstance(call, dict) and isinstance(call.get("name"), str)
    ]
    waiting = bool(states.next_nodes(last.checkpoint_id))
    status = _status(values) if values.get("status") or not waiting else "interrupted"
    return TurnSummary(
        turn=turn,
        preview=next((r.preview for r in rows if r.preview), ""),
        status=status,
        steps=len(rows),
        iteration=values.get("iteration", 0),
        retry_count=values.get("retry_count", 0),
        tools=tools,
        checkpoint_id=last.checkpoint_id,
        updated_at=last.created_at,
        success=is_success(status),
    )


def _status(values: dict[str, Any]) -> str:
    """The turn's status as app/service/outcome.py tells it, from the stored messages."""
    return settled_status(values, lambda: bool(unrecovered(*_tool_calls(values[MESSAGES]))))


def _tool_calls(messages: list[raw.Stored]) -> tuple[list[list[str]], list[ToolResult]]:
    """The current turn's model steps (their call ids) and tool results, from stored messages."""
    steps, results = [], []
    for message in current_turn(messages):
        fields = message.fields
        if message.name in ("AIMessage", "AIMessageChunk"):
            calls = fields.get("tool_calls") or []
            steps.append([c.get("id") or "" for c in calls if isinstance(c, dict)])
        elif message.name == "ToolMessage":
            failed = fields.get("status") == "error"
            results.append(
                ToolResult(fields.get("tool_call_id") or "", fields.get("name") or "", failed)
            )
    return steps, results


class StoredStates:
    """The states at some checkpoints of one branch (`wanted`), read as data: the messages folded
    forward once from the snapshot before the oldest of them."""

    def __init__(
        self, database: Database, thread_id: str, branch: list[CheckpointRow], wanted: set[str]
    ) -> None:
        self.database, self.thread_id = database, thread_id
        with reading(thread_id, "head"):
            self.checkpoints = database.stored_checkpoints(thread_id, wanted)
            for checkpoint_id, checkpoint in self.checkpoints.items():
                with reading(thread_id, checkpoint_id):
                    raw.STORED.checkpoint(checkpoint)
            ids = [row.checkpoint_id for row in branch]
            first = min(ids.index(c) for c in wanted)
            start, messages = self._seed(ids, first)
            writes = database.stored_writes(thread_id, ids[start:], MESSAGES)
            self.messages: dict[str, list[raw.Stored]] = {}
            for checkpoint_id in ids[start:]:
                if checkpoint_id in wanted:
                    messages = self._own_messages(checkpoint_id, messages)
                    self.messages[checkpoint_id] = messages
                for write in writes.get(checkpoint_id, []):
                    with reading(thread_id, checkpoint_id):
                        raw.STORED.messages(write.value, f"a write to {MESSAGES}")
                        messages = add_messages(messages, write.value)

    def _seed(self, ids: list[str], position: int) -> tuple[int, list[raw.Stored]]:
        """Where the fold starts: the nearest checkpoint at or before `position` that stores the
        messages (LangGraph's ancestor walk), or the root with none."""
        target = self.checkpoints[ids[position]]
        if MESSAGES not in target["channel_versions"]:
            return position, []
        for index in range(position, -1, -1):
            checkpoint = self._checkpoint(ids[index])
            if MESSAGES in checkpoint["channel_values"]:
                return index, stored_list(checkpoint["channel_values"][MESSAGES])
        return 0, []

    def _checkpoint(self, checkpoint_id: str) -> dict:
        if checkpoint_id not in self.checkpoints:
            with reading(self.thread_id, checkpoint_id):
                found = self.database.stored_checkpoints(self.thread_id, [checkpoint_id])
                raw.STORED.checkpoint(found[checkpoint_id])
            self.checkpoints.update(found)
        return self.checkpoints[checkpoint_id]

    def _own_messages(self, checkpoint_id: str, folded: list[raw.Stored]) -> list[raw.Stored]:
        checkpoint = self.checkpoints[checkpoint_id]
        if MESSAGES not in checkpoint["channel_versions"]:
            return []
        stored = checkpoint["channel_values"].get(MESSAGES)
        return folded if stored is None else stored_list(stored)

    def values(self, checkpoint_id: str) -> dict[str, Any]:
        """The state's fields at the checkpoint, as `get_state` gives them for a past checkpoint."""
        stored = self.checkpoints[checkpoint_id]["channel_values"]
        fields = {k: v for k, v in stored.items() if not k.startswith(("branch:", "__"))}
        return fields | {MESSAGES: self.messages[checkpoint_id]}

    def next_nodes(self, checkpoint_id: str) -> list[str]:
        return next_nodes(self.checkpoints[checkpoint_id])

    def check_head(self, head: str) -> None:
        """As loading the head checks it: every pending write decodes and has the right shape,
        and the state (with what finished tasks wrote) has fields of the right types."""
        with reading(self.thread_id, head):
            pending = self.database.stored_writes(self.thread_id, [head]).get(head, [])
            for write in pending:
                raw.STORED.write((write.task_id, write.channel, write.value))
        live = self.values(head)
        for write in pending:
            if write.channel in field_types.FIELD_TYPES:
                live[write.channel] = write.value
        reason = field_types.unreadable_reason(live, is_message=raw.is_stored_message)
        if reason:
            raise unreadable(self.thread_id, head, reason)


def next_nodes(checkpoint: dict) -> list[str]:
    """The nodes that would run next from a stored checkpoint (`StateSnapshot.next` of a past
    one): those whose trigger channel holds a version newer than the node has seen."""
    versions, seen = checkpoint["channel_versions"], checkpoint["versions_seen"]
    null = next((type(v)() for v in versions.values()), 0)
    waiting = []
    for channel in checkpoint["channel_values"]:
        node = START if channel == START else channel.removeprefix(TRIGGER)
        if node == channel and channel != START:
            continue
        if node not in seen or versions.get(channel, null) > seen[node].get(channel, null):
            waiting.append(node)
    return waiting


def stored_list(value: Any) -> list:
    if isinstance(value, raw.Snapshot):
        value = value.value
    raw.STORED.messages(value, f"the stored {MESSAGES}")
    return list(value) if isinstance(value, list | tuple) else [value]


def add_messages(current: list[raw.Stored], new: Any) -> list[raw.Stored]:
    """LangGraph's `add_messages` on stored messages: a message with a known id replaces it in
    place, a RemoveMessage removes it (all of them, for REMOVE_ALL), any other is appended."""
    batch = list(new) if isinstance(new, list | tuple) else [new]
    removes_all = [i for i, m in enumerate(batch) if _removes(m) and _id(m) == REMOVE_ALL]
    if removes_all:
        return batch[removes_all[-1] + 1 :]
    merged = list(current)
    position = {_id(m): i for i, m in enumerate(merged) if _id(m) is not None}
    removed: set[str] = set()
    for message in batch:
        key = _id(message)
        if key is not None and key in position:
            if _removes(message):
                removed.add(key)
            else:
                removed.discard(key)
                merged[position[key]] = message
        elif _removes(message):
            raise UnreadableCheckpointError(
                f"a write removes the message {str(key)[:60]}, not held"
            )
        else:
            if key is not None:
                position[key] = len(merged)
            merged.append(message)
    return [m for m in merged if _id(m) not in removed] if removed else merged


def current_turn(messages: list[raw.Stored]) -> list[raw.Stored]:
    """Messages from the last human message (inclusive) to the end (graphs/shared/messages.py)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].name in ("HumanMessage", "HumanMessageChunk"):
            return messages[index:]
    return messages


def _id(message: raw.Stored) -> str | None:
    key = message.fields.get("id")
    return key if isinstance(key, str) else None


def _removes(message: raw.Stored) -> bool:
    return message.name == "RemoveMessage"
