"""What the time-travel services did, told on the terminal (the command and the REPL share it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from app.service.timetravel import RollbackReport


def print_rollback(console: Console, report: RollbackReport) -> None:
    target = report.target
    console.print(
        f"[bold]{report.thread_id}[/bold] is back at turn {target.turn} "
        f"(checkpoint {target.checkpoint_id})."
    )
    for turn, preview in report.undone_turns:
        console.print(f"  undone: turn {turn} · {preview}", markup=False)
    for line in report.workspace.lines():
        console.print(f"  workspace: {line}", markup=False)
    if report.pending:
        console.print(
            f"  the head is mid-turn (next: {', '.join(report.pending)}): `replay` re-runs it; "
            "a new message closes it",
            markup=False,
        )
    console.print(
        f"  undo this with: rollback --thread {report.thread_id} --checkpoint "
        f"{report.previous_head}",
        markup=False,
    )
