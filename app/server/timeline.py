"""A thread's timeline for the API: turns, checkpoints and branch tree; rollback and fork.

Rollback and fork call the same services as the CLI (`app.service.timetravel`); ids are validated first.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from app.config import Settings
from app.db.base import Database
from app.server.schemas import ForkRequest, RollbackRequest
from app.service import api
from app.service.index import CheckpointIndex, CheckpointRow

TURNS_SHOWN = 50


def checkpoint_dict(
    row: CheckpointRow, index: CheckpointIndex, on_branch: AbstractSet[str]
) -> dict:
    return row.as_dict() | {
        "on_branch": row.checkpoint_id in on_branch,
        "head": row.checkpoint_id == index.head.checkpoint_id,
    }


def history(database: Database, thread_id: str, limit: int = TURNS_SHOWN) -> dict:
    found = api.history(database, thread_id, limit)
    index = found.index
    return {
        "thread_id": thread_id,
        "head": index.head.checkpoint_id,
        "turns": [t.as_dict() for t in found.turns],
        "checkpoints": [checkpoint_dict(r, index, found.on_branch) for r in index.rows],
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


def do_rollback(
    database: Database, settings: Settings, thread_id: str, request: RollbackRequest
) -> dict:
    report = api.rollback(
        database,
        thread_id,
        turns=request.turns,
        checkpoint=request.checkpoint_id,
        workspace=None if request.keep_files else settings.workspace,
        force=request.force,
    )
    index = api.checkpoints(database, thread_id)
    return {
        "thread_id": thread_id,
        "head": index.head.checkpoint_id,
        "target": checkpoint_dict(report.target, index, {report.target.checkpoint_id})
        | {"head": False},
        "previous_head": report.previous_head,
        "undone_turns": [{"turn": t, "preview": p} for t, p in report.undone_turns],
        "workspace": report.workspace.lines(),
        "pending": list(report.pending),
    }


def do_fork(
    database: Database, settings: Settings, thread_id: str, new_id: str, request: ForkRequest
) -> dict:
    report = api.fork(
        database,
        thread_id,
        new_id,
        checkpoint=request.checkpoint_id,
        workspace=None if request.keep_files else settings.workspace,
        force=request.force,
    )
    return {
        "thread_id": new_id,
        "forked_from": {"thread_id": thread_id, "checkpoint_id": report.source.checkpoint_id},
        "head": report.head,
        "workspace": report.workspace.lines(),
    }
