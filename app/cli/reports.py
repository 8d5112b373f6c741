"""What the time-travel services did, told on the terminal (the command and the REPL share it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.cli.hints import command
from app.service.threads import short_id
from app.text import shown

if TYPE_CHECKING:
    from rich.console import Console

    from app.db.base import Database
    from app.service.timetravel import RollbackReport


def print_rollback(
    console: Console, report: RollbackReport, db: str | None = None, head: str | None = None
) -> None:
    """What the rollback undid, and the commands that undo it or re-run a pending step (with
    `db`, the --db they need); `head` is the id `history` now shows for the turn."""
    thread = report.thread_id
    undo = command("rollback", "--thread", thread, "--checkpoint", undo_id(report), db=db)
    replay = command(
        "replay", "--thread", thread, "--checkpoint", short_id(report.target.checkpoint_id), db=db
    )
    print_rollback_report(console, report, undo=undo, replay=replay, head=head)


def head_shown(database: Database, thread: str) -> str | None:
    """The checkpoint id `history` shows for the thread's last turn, or None before any turn."""
    from app.service import api

    turns = api.history(database, thread, 1).turns
    return turns[0].checkpoint_id if turns else None


def undo_id(report: RollbackReport) -> str:
    return short_id(report.previous_head)


def print_rollback_report(
    console: Console, report: RollbackReport, *, undo: str, replay: str, head: str | None = None
) -> None:
    """What the rollback undid; `undo` and `replay` say what to type to undo it or re-run the
    step the head is in the middle of. The checkpoint named first is `head`, the copy of the
    target that is now the head (the id `history` shows), when it is known."""
    target = short_id(report.target.checkpoint_id)
    named = short_id(head) if head else target
    where = f"checkpoint {named}" if named == target else f"checkpoint {named}, a copy of {target}"
    console.print(
        f"[bold]{report.thread_id}[/bold] is back at turn {report.target.turn} ({where})."
    )
    for turn, preview in report.undone_turns:
        console.print(f"  undone: turn {turn} · {shown(preview, one_line=True)}", markup=False)
    for line in report.workspace.lines():
        console.print(f"  workspace: {line}", markup=False)
    if report.pending:
        console.print(
            f"  the head is mid-turn (next: {', '.join(report.pending)}); re-run it with: "
            f"{replay}, or send a new message to close it",
            markup=False,
        )
    console.print(f"  undo this with: {undo}", markup=False)
