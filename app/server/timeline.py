"""A thread's timeline for the API: turns, checkpoints and branch tree; rollback and fork.

Rollback and fork call the same services as the CLI (`app.timetravel`); ids are validated first.
"""

from __future__ import annotations

from app.config import Settings
from app.db import lock_thread, thread_interrupted
from app.db.base import Database
from app.errors import UsageError
from app.render import message_dict
from app.server.errors import ConflictError, NotFoundError
from app.threads import load_state, thread_exists, thread_graph
from app.timetravel import CheckpointIndex, CheckpointRow, fork, rollback, state_at, turn_history
from graphs.react.graph import build_graph

TURNS_SHOWN = 50


def open_index(database: Database, thread_id: str) -> CheckpointIndex:
    if not thread_exists(database, thread_id):
        raise NotFoundError(f"thread {thread_id} does not exist; create it with POST /threads")
    return CheckpointIndex(database, thread_id)


def resolve(index: CheckpointIndex, ref: str) -> CheckpointRow:
    """Like the CLI's resolve, but an id matching nothing is a 404."""
    try:
        return index.resolve(ref)
    except UsageError as exc:
        ref = ref.strip()
        if any(
            ref and (r.checkpoint_id.startswith(ref) or r.checkpoint_id.endswith(ref))
            for r in index.rows
        ):
            raise
        raise NotFoundError(str(exc)) from None


def checkpoint_dict(row: CheckpointRow, index: CheckpointIndex, on_branch: set[str]) -> dict:
    return row.as_dict() | {
        "on_branch": row.checkpoint_id in on_branch,
        "head": row.checkpoint_id == index.head.checkpoint_id,
    }


def history(database: Database, thread_id: str, limit: int = TURNS_SHOWN) -> dict:  # type: ignore[no-untyped-def]
    index = open_index(database, thread_id)
    graph = thread_graph(database.saver, thread_id)
    load_state(graph, thread_id)  # an unreadable head is an error, as in the CLI
    on_branch = {r.checkpoint_id for r in index.branch()}
    return {
        "thread_id": thread_id,
        "head": index.head.checkpoint_id,
        "turns": [t.as_dict() for t in turn_history(graph, index, limit)],
        "checkpoints": [checkpoint_dict(r, index, on_branch) for r in index.rows],
        "tree": branch_segments(index),
    }


def branch_segments(index: CheckpointIndex) -> list[dict]:
    """The current branch as a list of segments (one per turn); every branch a rollback or replay
    left behind hangs under the segment where it split off — the data of `history --tree`."""
    children = index.children()
    on_branch = {r.checkpoint_id for r in index.branch()}
    return _walk(children.get(None, [])[:1], children, index.head.checkpoint_id, on_branch) + [
        seg
        for other in children.get(None, [])[1:]
        for seg in _walk([other], children, index.head.checkpoint_id, on_branch)
    ]


def _walk(start: list[CheckpointRow], children: dict, head: str, on_branch: set[str]) -> list[dict]:
    segments: list[dict] = []
    row = start[0] if start else None
    while row is not None:
        run = [row]
        while True:
            kids = children.get(run[-1].checkpoint_id, [])
            # A segment is one turn; a rollback, replay or close starts a new one.
            if len(kids) != 1 or kids[0].turn != row.turn or kids[0].note not in {"", row.note}:
                break
            run.append(kids[0])
        kids = children.get(run[-1].checkpoint_id, [])
        ahead = [k for k in kids if k.checkpoint_id in on_branch] or kids[:1]
        segment = _segment(run, head, on_branch)
        segment["branches"] = [
            _walk([k], children, head, on_branch) for k in kids if k not in ahead[:1]
        ]
        segments.append(segment)
        row = ahead[0] if ahead else None
    return segments


def _segment(run: list[CheckpointRow], head: str, on_branch: set[str]) -> dict:
    first, last = run[0], run[-1]
    return {
        "turn": first.turn,
        "preview": first.preview,
        "first": first.checkpoint_id,
        "last": last.checkpoint_id,
        "checkpoints": len(run),
        "note": first.note,
        "head": any(r.checkpoint_id == head for r in run),
        "on_branch": last.checkpoint_id in on_branch,
    }


def thread_detail(database: Database, settings: Settings, thread_id: str) -> dict:  # type: ignore[no-untyped-def]
    index = open_index(database, thread_id)
    state = load_state(thread_graph(database.saver, thread_id), thread_id)
    turns = [r.turn for r in index.rows if r.turn is not None]
    return {
        "thread_id": thread_id,
        "title": next((r.preview for r in index.rows if r.preview), ""),
        "turns": state.values.get("turn", max(turns, default=0)),
        "checkpoints": len(index.rows),
        "updated_at": index.head.created_at,
        "interrupted": thread_interrupted(settings.database, thread_id),
        "head": index.head.checkpoint_id,
        "next": list(state.next),
        "status": state.values.get("status"),
        "messages": [message_dict(m) for m in state.values.get("messages", [])],
    }


def do_rollback(database: Database, settings: Settings, thread_id: str, request) -> dict:  # type: ignore[no-untyped-def]
    with lock_thread(settings.database, thread_id):
        index = open_index(database, thread_id)
        target = _rollback_target(index, request.turns, request.checkpoint_id)
        report = rollback(
            thread_graph(database.saver, thread_id),
            index,
            target,
            workspace=None if request.keep_files else settings.workspace,
            force=request.force,
        )
        head = CheckpointIndex(database, thread_id).head.checkpoint_id
    on_branch = {target.checkpoint_id}
    return {
        "thread_id": thread_id,
        "head": head,
        "target": checkpoint_dict(target, index, on_branch) | {"head": False},
        "previous_head": report.previous_head,
        "undone_turns": [{"turn": t, "preview": p} for t, p in report.undone_turns],
        "workspace": report.workspace.lines(),
        "pending": list(report.pending),
    }


def _rollback_target(index: CheckpointIndex, turns: int | None, ref: str | None) -> CheckpointRow:
    if ref is not None:
        return resolve(index, ref)
    current = index.head.turn or 0
    if turns >= current:
        raise UsageError(
            f"thread {index.thread_id} has {current} turn(s); roll back at most {current - 1} "
            "(to start over, use a new thread)"
        )
    return index.end_of_turn(current - turns)


def do_fork(database: Database, settings: Settings, thread_id: str, new_id: str, request) -> dict:  # type: ignore[no-untyped-def]
    with lock_thread(settings.database, new_id):
        index = open_index(database, thread_id)
        row = resolve(index, request.checkpoint_id) if request.checkpoint_id else index.head
        if thread_exists(database, new_id):
            raise ConflictError(f'thread {new_id} already exists; choose another "to"')
        report = fork(
            thread_graph(database.saver, thread_id),
            index,
            row,
            new_id,
            database,
            workspace=None if request.keep_files else settings.workspace,
            force=request.force,
        )
        head = CheckpointIndex(database, new_id).head.checkpoint_id
    return {
        "thread_id": new_id,
        "forked_from": {"thread_id": thread_id, "checkpoint_id": row.checkpoint_id},
        "head": head,
        "workspace": report.lines(),
    }


def start_state(database: Database, thread_id: str, checkpoint_id: str):  # type: ignore[no-untyped-def]
    return state_at(thread_graph(database.saver, thread_id), thread_id, checkpoint_id)


def create_thread(database: Database, settings: Settings, thread_id: str) -> bool:  # type: ignore[no-untyped-def]
    """An empty thread (one checkpoint, no turns yet); False when it already exists."""
    with lock_thread(settings.database, thread_id):
        if thread_exists(database, thread_id):
            return False
        build_graph(database.saver).update_state(
            {"configurable": {"thread_id": thread_id}, "metadata": {"created_by": "api"}},
            {"messages": [], "turn": 0},
            as_node="finalize",
        )
    return True
