"""Time-travel commands: history, show, diff, rollback, replay, fork. Registered on the main app."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from app.config import Settings
from app.cli import DbOption, JsonOption, ThreadOption, app, err, load_settings, out, state
from app.errors import AgentRunError, UsageError
from app.render_time import (
    STRATEGY_FIELDS,
    branch_tree,
    checkpoints_table,
    history_table,
    strategy_lines,
)

CheckpointOption = Annotated[
    str | None, typer.Option("--checkpoint", "-c", help="Checkpoint id (or a unique part of it).")
]
KeepFilesOption = Annotated[
    bool, typer.Option("--keep-files", help="Leave the workspace files as they are.")
]
WorkspaceOption = Annotated[
    Path | None, typer.Option("--workspace", help="The workspace to restore.")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Overwrite workspace files changed outside Waypoint.")
]


DEFAULT_TURNS_SHOWN = 20


@dataclass
class OpenThread:
    settings: Settings
    saver: object
    graph: object
    index: object
    database: object = None


@contextlib.contextmanager
def open_thread(
    thread: str, db: str | None, *, write: bool = False, **overrides: object
) -> Iterator[OpenThread]:
    """Validate the thread id, open the database and index the thread's checkpoints; a `write`
    command takes the thread's lock first, so what it reads cannot change under it."""
    from app.db import lock_thread, open_database
    from app.store import validate_thread_id
    from app.threads import thread_graph
    from app.timetravel import CheckpointIndex

    settings = load_settings(db=db, **overrides)
    validate_thread_id(thread)
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(open_database(settings.database, settings.busy_timeout))
        if write:
            stack.enter_context(lock_thread(settings.database, thread))
        index = CheckpointIndex(database, thread)
        graph = thread_graph(database.saver, thread)
        yield OpenThread(settings, database.saver, graph, index, database)


@app.command()
def history(
    thread: ThreadOption,
    db: DbOption = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Show at most N rows, newest first (turns: 20)."),
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every checkpoint, not one row per turn.")
    ] = False,
    tree: Annotated[
        bool, typer.Option("--tree", help="The branches rollbacks and replays made.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show a thread's turns (or checkpoints, or branch tree), newest first."""
    from app.threads import load_state
    from app.timetravel import turn_history

    with open_thread(thread, db) as t:
        if tree:
            out.print(branch_tree(t.index))
            return
        if every:
            rows = t.index.rows[::-1][:limit]
            on_branch = {r.checkpoint_id for r in t.index.branch()}
            if as_json:
                out.print_json(
                    json.dumps(
                        [r.as_dict() | {"on_branch": r.checkpoint_id in on_branch} for r in rows],
                        ensure_ascii=False,
                    )
                )
            else:
                out.print(checkpoints_table(thread, rows, t.index.head.checkpoint_id, on_branch))
            return
        load_state(t.graph, thread)
        turns = turn_history(t.graph, t.index, limit or DEFAULT_TURNS_SHOWN)
        total = len({r.turn for r in t.index.branch() if r.turn is not None})
    if total > len(turns) and not as_json:
        err.print(
            f"[dim]showing the newest {len(turns)} of {total} turns; --limit N for more[/dim]"
        )
    if as_json:
        out.print_json(json.dumps([turn.as_dict() for turn in turns], ensure_ascii=False))
    else:
        out.print(history_table(thread, turns))


@app.command()
def show(
    thread: ThreadOption,
    checkpoint: CheckpointOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """The full state at a checkpoint (default: the head), messages rendered like the chat."""
    from app.render import message_dict, print_messages
    from app.timetravel import state_at

    with open_thread(thread, db) as t:
        row = t.index.resolve(checkpoint) if checkpoint else t.index.head
        snapshot = state_at(t.graph, thread, row.checkpoint_id)
    values = snapshot.values
    counters = {
        k: values.get(k) for k in ("turn", "iteration", "retry_count", "status", "last_error")
    }
    strategy = {k: values[k] for k in STRATEGY_FIELDS if values.get(k) not in (None, [], 0)}
    if as_json:
        data = {
            "thread_id": thread,
            "checkpoint": row.as_dict(),
            "next": list(snapshot.next),
            **counters,
            **strategy,
            "messages": [message_dict(m) for m in values.get("messages", [])],
        }
        out.print_json(json.dumps(data, ensure_ascii=False, default=str))
        return
    err.print(
        f"[bold]thread {thread}[/bold] at {row.checkpoint_id} (step {row.step}, "
        f"{row.created_at}){' — head' if row is t.index.head else ''}"
    )
    err.print(
        " · ".join(f"{k}={v}" for k, v in counters.items() if v is not None)
        + (f" · next={','.join(snapshot.next)}" if snapshot.next else ""),
        markup=False,
    )
    for line in strategy_lines(strategy):
        err.print(line, markup=False)
    print_messages(out, values.get("messages", []))


@app.command()
def diff(
    thread: ThreadOption,
    before: Annotated[str, typer.Argument(help="The earlier checkpoint id.")],
    after: Annotated[str, typer.Argument(help="The later checkpoint id.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """What changed between two checkpoints: messages added or removed, counters."""
    from app.render import print_messages
    from app.timetravel import diff_states, state_at

    with open_thread(thread, db) as t:
        a, b = t.index.resolve(before), t.index.resolve(after)
        changes = diff_states(
            state_at(t.graph, thread, a.checkpoint_id).values,
            state_at(t.graph, thread, b.checkpoint_id).values,
        )
    if as_json:
        out.print_json(json.dumps(changes.as_dict(), ensure_ascii=False, default=str))
        return
    out.print(f"[bold]{a.checkpoint_id} → {b.checkpoint_id}[/bold]")
    for key, (old, new) in changes.counters.items():
        out.print(f"  {key}: {old} → {new}", markup=False)
    out.print(f"[green]+ {len(changes.added)} message(s) added[/green]")
    print_messages(out, changes.added)
    out.print(f"[red]- {len(changes.removed)} message(s) removed[/red]")
    print_messages(out, changes.removed)


@app.command()
def rollback(
    thread: ThreadOption,
    turns: Annotated[
        int | None, typer.Option("--turns", "-n", min=1, help="Undo the last N turns.")
    ] = None,
    checkpoint: CheckpointOption = None,
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    keep_files: KeepFilesOption = False,
    force: ForceOption = False,
) -> None:
    """Make an earlier checkpoint the head again; nothing is deleted, so it can be undone too."""
    if (turns is None) == (checkpoint is None):
        raise UsageError("give exactly one of --turns N or --checkpoint ID")
    with open_thread(thread, db, write=True, workspace=workspace) as t:
        report = do_rollback(t, turns, checkpoint, keep_files=keep_files, force=force)
    print_rollback(report)


def do_rollback(
    t: OpenThread, turns: int | None, checkpoint: str | None, *, keep_files: bool, force: bool
):  # type: ignore[no-untyped-def]
    from app.timetravel import rollback as rollback_to

    if checkpoint:
        target = t.index.resolve(checkpoint)
    else:
        current = t.index.head.turn or 0
        if turns >= current:
            raise UsageError(
                f"thread {t.index.thread_id} has {current} turn(s); roll back at most {current - 1} "
                "(to start over, use a new thread)"
            )
        target = t.index.end_of_turn(current - turns)
    return rollback_to(
        t.graph,
        t.index,
        target,
        workspace=None if keep_files else t.settings.workspace,
        force=force,
    )


def print_rollback(report) -> None:  # type: ignore[no-untyped-def]
    target = report.target
    err.print(
        f"[bold]{report.thread_id}[/bold] is back at turn {target.turn} "
        f"(checkpoint {target.checkpoint_id})."
    )
    for turn, preview in report.undone_turns:
        err.print(f"  undone: turn {turn} · {preview}", markup=False)
    for line in report.workspace.lines():
        err.print(f"  workspace: {line}", markup=False)
    if report.pending:
        err.print(
            f"  the head is mid-turn (next: {', '.join(report.pending)}): `replay` re-runs it; "
            "a new message closes it",
            markup=False,
        )
    err.print(
        f"  undo this with: rollback --thread {report.thread_id} --checkpoint "
        f"{report.previous_head}",
        markup=False,
    )


@app.command()
def replay(
    thread: ThreadOption,
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c", help="Where to re-run from.")],
    model: Annotated[str | None, typer.Option("--model", help="offline | openai:<name>.")] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Re-run tools with side effects without asking.")
    ] = False,
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    keep_files: KeepFilesOption = False,
    force: ForceOption = False,
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="One JSON event per line on stdout.")
    ] = False,
) -> None:
    """Re-execute the graph from a checkpoint on a new branch, streaming like `chat`."""
    from app.chat import TurnInterrupted
    from app.render import ConsoleRenderer, JsonlRenderer
    from app.runtime import open_runtime
    from app.timetravel import state_at
    from app.workspace_sync import restore_workspace

    with open_thread(thread, db, model=model, workspace=workspace) as t:
        row = t.index.resolve(checkpoint)
        spared: list[str] = []  # files changed outside Waypoint: the replay must not write them
        if not keep_files:
            head = state_at(t.graph, thread, t.index.head.checkpoint_id)
            start = state_at(t.graph, thread, row.checkpoint_id)
            report = restore_workspace(
                t.settings.workspace,
                head.values.get("messages", []),
                start.values.get("messages", []),
                force=force,
            )
            for line in report.lines():
                err.print(f"workspace: {line}", markup=False)
            spared = report.conflicts
        renderer = (
            JsonlRenderer(out, debug=state["debug"])
            if jsonl
            else ConsoleRenderer(out, err, debug=state["debug"])
        )
        with open_runtime(t.settings) as runtime:
            try:
                session = runtime.session(thread)
                result = session.replay(row.checkpoint_id, renderer, _approver(yes), spared)
            except TurnInterrupted as exc:
                err.print(f"[yellow]{exc}; what was shown is saved[/yellow]")
                raise typer.Exit(130) from None
    if result.status == "failed":
        raise AgentRunError(f"the replay of thread {thread} failed")


def _approver(yes: bool):  # type: ignore[no-untyped-def]
    def approve(calls: list) -> bool:
        described = "; ".join(
            f"{c['name']} {json.dumps(c['args'], ensure_ascii=False)[:120]}" for c in calls
        )
        if yes:
            err.print(f"re-running (--yes): {described}", markup=False)
            return True
        if not sys.stdin.isatty():
            raise UsageError(
                f"the replay would re-run tools with side effects ({described}); "
                "pass --yes to allow it"
            )
        return typer.confirm(f"The replay will re-run {described}. Continue?", default=False)

    return approve


@app.command()
def fork(
    thread: ThreadOption,
    to: Annotated[str, typer.Option("--to", help="The new thread's id.")],
    checkpoint: CheckpointOption = None,
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    keep_files: KeepFilesOption = False,
    force: ForceOption = False,
) -> None:
    """Copy a thread's state at a checkpoint (default: the head) into a new thread."""
    from app.db import lock_thread
    from app.store import validate_thread_id
    from app.timetravel import fork as fork_thread

    validate_thread_id(to)
    with open_thread(thread, db, workspace=workspace) as t, lock_thread(t.settings.database, to):
        row = t.index.resolve(checkpoint) if checkpoint else t.index.head
        report = fork_thread(
            t.graph,
            t.index,
            row,
            to,
            t.database,
            workspace=None if keep_files else t.settings.workspace,
            force=force,
        )
    err.print(
        f"forked {thread} at {row.checkpoint_id} (turn {row.turn}) into [bold]{to}[/bold]; "
        f"continue with: python -m app chat --thread {to}"
    )
    for line in report.lines():
        err.print(f"  workspace: {line}", markup=False)
