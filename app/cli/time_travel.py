"""Time-travel commands: history, show, diff, rollback, replay, fork. Each calls one service
(app/service/api.py), which locks what it writes, and renders what it returns."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.database import opened
from app.cli.hints import command, db_flag
from app.cli.io import Invocation, load_settings
from app.cli.options import (
    DbOption,
    JsonOption,
    ModelOption,
    ThreadOption,
    command_group,
    examples,
)
from app.cli.reports import head_shown, print_rollback
from app.cli.tables import (
    STRATEGY_FIELDS,
    branch_tree,
    checkpoints_table,
    history_table,
    short_id,
    strategy_lines,
)
from app.errors import AgentRunError, UsageError
from app.text import plural, shown

if TYPE_CHECKING:
    from app.service.index import CheckpointIndex

commands = command_group()

CheckpointOption = Annotated[
    str | None,
    typer.Option(
        "--checkpoint",
        "-c",
        metavar="ID",
        help="Checkpoint id, or a unique part of it (6+ characters, e.g. the 12 `history` shows).",
    ),
]
KeepFilesOption = Annotated[
    bool, typer.Option("--keep-files", help="Leave the workspace files as they are.")
]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option("--workspace", metavar="DIR", help="The workspace whose files follow it back."),
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Overwrite workspace files changed outside Waypoint.")
]


DEFAULT_TURNS_SHOWN = 20


@commands.command(
    epilog=examples(
        "history --thread demo",
        "history --thread demo --limit 5 --json",
        "history --thread demo --all",
        "history --thread demo --tree",
    )
)
def history(
    ctx: typer.Context,
    thread: ThreadOption,
    db: DbOption = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=1, metavar="N", help="Show at most N rows, newest first (turns: 20)."
        ),
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every checkpoint, not one row per turn.")
    ] = False,
    tree: Annotated[
        bool, typer.Option("--tree", help="The branches rollbacks and replays made.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """A thread's turns, newest first (--all checkpoints, --tree).

    Per turn: the input, how it ended, the tools called and the turn's last checkpoint id."""
    io: Invocation = ctx.obj
    from app.service import api

    if tree or every:
        with opened(db) as (_, database):
            index = api.checkpoints(database, thread)
        if tree:
            io.out.print(branch_tree(index), soft_wrap=False)
        else:
            _print_checkpoints(io, index, limit, as_json)
        return
    with opened(db) as (_, database):
        found = api.history(database, thread, limit or DEFAULT_TURNS_SHOWN)
    if found.total_turns > len(found.turns) and not as_json:
        io.err.print(
            f"[dim]showing the newest {len(found.turns)} of {found.total_turns} turns; "
            "--limit N for more[/dim]"
        )
    if as_json:
        io.print_json([t.as_dict() for t in found.turns])
    else:
        io.out.print(history_table(thread, found.turns, io.out.width), soft_wrap=False)


def _print_checkpoints(
    io: Invocation, index: CheckpointIndex, limit: int | None, as_json: bool
) -> None:
    rows = index.rows[::-1][:limit]
    on_branch = {r.checkpoint_id for r in index.branch()}
    if as_json:
        data = [r.as_dict() | {"on_branch": r.checkpoint_id in on_branch} for r in rows]
        io.print_json(data)
    else:
        io.out.print(
            checkpoints_table(
                index.thread_id, rows, index.head.checkpoint_id, on_branch, io.out.width
            ),
            soft_wrap=False,
        )


@commands.command(
    epilog=examples("show --thread demo", "show --thread demo --checkpoint 9f3a6c2b1d7e --json")
)
def show(
    ctx: typer.Context,
    thread: ThreadOption,
    checkpoint: CheckpointOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """The full state at a checkpoint (default: the head).

    The counters, what the thread's strategy keeps, then the messages as the chat showed them."""
    io: Invocation = ctx.obj
    from app.cli.render import print_messages
    from app.service import api
    from app.service.events import message_dict

    with opened(db) as (_, database):
        found = api.checkpoint_state(database, thread, checkpoint)
    row, snapshot, values = found.row, found.snapshot, found.snapshot.values
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
        io.print_json(data, default=str)
        return
    io.err.print(
        f"[bold]thread {thread}[/bold] at {row.checkpoint_id} (step {row.step}, "
        f"{row.created_at}){' — head' if found.is_head else ''}"
    )
    io.err.print(
        shown(
            " · ".join(f"{k}={v}" for k, v in counters.items() if v is not None)
            + (f" · next={','.join(snapshot.next)}" if snapshot.next else ""),
            one_line=True,
        ),
        markup=False,
    )
    for line in strategy_lines(strategy):
        io.err.print(line, markup=False)
    print_messages(io.out, values.get("messages", []))


@commands.command(epilog=examples("diff --thread demo 3b1f0c9e2a41 9f3a6c2b1d7e"))
def diff(
    ctx: typer.Context,
    thread: ThreadOption,
    before: Annotated[str, typer.Argument(metavar="BEFORE", help="The earlier checkpoint id.")],
    after: Annotated[str, typer.Argument(metavar="AFTER", help="The later checkpoint id.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """What changed between two checkpoints: messages and counters."""
    io: Invocation = ctx.obj
    from app.cli.render import print_messages
    from app.service import api

    with opened(db) as (_, database):
        found = api.diff(database, thread, before, after)
    changes = found.changes
    if as_json:
        io.print_json(changes.as_dict(), default=str)
        return
    io.out.print(
        f"[bold]{short_id(found.before.checkpoint_id)} → {short_id(found.after.checkpoint_id)}[/bold]"
    )
    for key, (old, new) in changes.counters.items():
        io.out.print(shown(f"  {key}: {old} → {new}", one_line=True), markup=False)
    io.out.print(f"[green]+ {plural(len(changes.added), 'message')} added[/green]")
    print_messages(io.out, changes.added)
    io.out.print(f"[red]- {plural(len(changes.removed), 'message')} removed[/red]")
    print_messages(io.out, changes.removed)


@commands.command(
    epilog=examples(
        "rollback --thread demo --turns 1",
        "rollback --thread demo --checkpoint 9f3a6c2b1d7e",
        "rollback --thread demo --turns 2 --keep-files",
    )
)
def rollback(
    ctx: typer.Context,
    thread: ThreadOption,
    turns: Annotated[
        int | None,
        typer.Option("--turns", "-n", min=1, metavar="N", help="Undo the last N turns."),
    ] = None,
    checkpoint: CheckpointOption = None,
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    keep_files: KeepFilesOption = False,
    force: ForceOption = False,
) -> None:
    """Make an earlier checkpoint the head again (it can be undone).

    Nothing is deleted; the files the agent wrote follow the conversation back."""
    io: Invocation = ctx.obj
    from app.service import api

    with opened(db, workspace=workspace) as (settings, database):
        report = api.rollback(
            database,
            thread,
            turns=turns,
            checkpoint=checkpoint,
            workspace=None if keep_files else settings.workspace,
            force=force,
        )
        head = head_shown(database, thread)
    print_rollback(io.err, report, db=db_flag(db, settings), head=head)


@commands.command(
    epilog=examples(
        "replay --thread demo --checkpoint 9f3a6c2b1d7e",
        "replay -t demo -c 9f3a6c2b1d7e --model openai:gpt-4o-mini --yes",
    )
)
def replay(
    ctx: typer.Context,
    thread: ThreadOption,
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", "-c", metavar="ID", help="Where to re-run from.")
    ],
    model: ModelOption = None,
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
    """Re-run the model and tools from a checkpoint, on a new branch."""
    io: Invocation = ctx.obj
    from app.cli.render import ConsoleRenderer, JsonlRenderer
    from app.service import api
    from app.service.replay import refuse_unconfirmed
    from app.service.runtime import open_runtime
    from app.service.session import TurnInterrupted
    from tools import side_effect_names

    settings = load_settings(db=db, model=model, workspace=workspace)
    confirmer = _Confirmer(io, yes)
    renderer = (
        JsonlRenderer(io.out, debug=io.debug)
        if jsonl
        else ConsoleRenderer(io.out, io.err, debug=io.debug)
    )
    with open_runtime(settings) as runtime:
        session = runtime.session(thread)
        # Asked before anything changes: a refusal leaves the files and the head as they were.
        try:
            start = api.prepare_replay(
                runtime.database,
                thread,
                checkpoint,
                workspace=None if keep_files else settings.workspace,
                force=force,
                check=refuse_unconfirmed(
                    side_effect_names(session.context.tools),
                    confirmer.confirm_names,
                    "pass --yes to allow it",
                ),
            )
        except UsageError:
            if not confirmer.declined:
                raise
            io.err.print(f"nothing replayed: thread {thread} is as it was", markup=False)
            return
        for line in start.workspace.lines():
            io.err.print(f"workspace: {line}", markup=False)
        try:
            with renderer:
                result = session.replay(
                    start.row.checkpoint_id,
                    renderer,
                    renderer.paused(confirmer.approve),
                    start.spared,
                )
        except TurnInterrupted as exc:
            io.err.print(f"[yellow]{exc}; what was shown is saved[/yellow]")
            raise typer.Exit(130) from None
    if result.status == "failed":
        raise AgentRunError(f"the replay of thread {thread} failed")


class _Confirmer:
    """Whether a replay may re-run tools with side effects: --yes, else the person at the
    terminal; without a terminal, no (the replay stops before them and says how to allow it).
    What was allowed before the replay started is not asked again when the replay meets it."""

    def __init__(self, io: Invocation, yes: bool) -> None:
        self.io, self.yes = io, yes
        self._allowed: list[str] = []
        self.declined = False  # the person answered no (not an error: nothing changes)

    def confirm_names(self, names: list[str]) -> bool:
        allowed = self._decide(", ".join(names))
        if allowed:
            self._allowed = list(names)
        return allowed

    def approve(self, calls: list) -> bool:
        names = [c["name"] for c in calls]
        if names == self._allowed:
            self._allowed = []
            return True
        from app.cli.approval_ui import approval_panel, call_summary

        if self.yes or not sys.stdin.isatty():
            allowed = self._decide("; ".join(call_summary(c) for c in calls))
        else:  # the calls in full, each argument a field, code as code; then the question
            from graphs.shared.approvals import REPLAY_REASON

            for call in calls:
                self.io.err.print(approval_panel({"reason": REPLAY_REASON, **call}))
            allowed = self._decide(f"{', '.join(names)} as shown above")
        if not allowed and not self.yes and not sys.stdin.isatty():
            self.io.err.print(
                f"not re-running {', '.join(names)} without a terminal: pass --yes to allow it",
                markup=False,
            )
        return allowed

    def _decide(self, described: str) -> bool:
        if self.yes:
            self.io.err.print(f"re-running (--yes): {described}", markup=False)
            return True
        if not sys.stdin.isatty():
            return False
        self.io.err.print(f"The replay will re-run {described}.", markup=False)
        allowed = typer.confirm("Continue?", default=False)
        self.declined = not allowed
        return allowed


@commands.command(
    epilog=examples(
        "fork --thread demo --to demo-alt",
        "fork -t demo -c 9f3a6c2b1d7e --to demo-alt --keep-files",
    )
)
def fork(
    ctx: typer.Context,
    thread: ThreadOption,
    to: Annotated[str, typer.Option("--to", metavar="ID", help="The new thread's id.")],
    checkpoint: CheckpointOption = None,
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    keep_files: KeepFilesOption = False,
    force: ForceOption = False,
) -> None:
    """Copy a thread at a checkpoint into a new thread."""
    io: Invocation = ctx.obj
    from app.service import api

    with opened(db, workspace=workspace) as (settings, database):
        report = api.fork(
            database,
            thread,
            to,
            checkpoint=checkpoint,
            workspace=None if keep_files else settings.workspace,
            force=force,
        )
    row = report.source
    io.err.print(
        f"forked {thread} at {short_id(row.checkpoint_id)} (turn {row.turn}) into [bold]{to}[/bold]; "
        f"continue with: {command('chat', '--thread', to, db=db_flag(db, settings))}"
    )
    for line in report.workspace.lines():
        io.err.print(f"  workspace: {line}", markup=False)
