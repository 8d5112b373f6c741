"""`threads`: list the stored threads, and delete, prune or vacuum them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from app.cli.database import database_of, opened
from app.cli.hints import command, db_flag
from app.cli.io import Invocation, load_settings
from app.cli.options import DbOption, JsonOption, command_group, examples
from app.errors import UsageError

commands = command_group(
    help="List, delete and prune the threads in the database.", no_args_is_help=True
)


@commands.command(
    "list", epilog=examples("threads list", "threads list --json --db /tmp/agent.sqlite")
)
def threads_list(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Every thread, newest first: id, title, turns, last update, size.

    A thread whose writer died mid-run is marked interrupted until its next turn."""
    io: Invocation = ctx.obj
    from app.cli.tables import threads_table
    from app.service.threads import list_threads

    settings = load_settings(db=db)
    path = settings.database.path
    if path is not None and _missing(path):  # a listing never creates a database
        if as_json:
            io.print_json([])
        else:
            io.out.print(
                f"no threads yet: {path} does not exist yet; start one with: "
                f"{command('chat', '--thread', 'demo', db=db)}",
                markup=False,
            )
        return
    with database_of(settings) as database:
        threads = list_threads(database)
    if as_json:
        io.print_json([t.as_dict() for t in threads])
        return
    io.out.print(threads_table(threads, io.out.width), soft_wrap=False)


@commands.command("delete", epilog=examples("threads delete demo --yes"))
def threads_delete(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="ID", help="The thread to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = None,
) -> None:
    """Delete a thread: every checkpoint and write.

    Workspace files are left alone; `threads vacuum` shrinks the file afterwards."""
    io: Invocation = ctx.obj
    from app.service import api

    with opened(db) as (settings, database):
        api.checkpoints(database, thread)  # it exists (before asking)
        if not _confirmed(f"Delete thread {thread} and all its checkpoints?", yes):
            io.err.print(f"nothing deleted: thread {thread} is as it was", markup=False)
            return
        report = api.delete_thread(database, thread)
    io.err.print(
        f"deleted thread {thread}: {report.checkpoints} checkpoints, {report.writes} writes "
        f"({report.bytes_freed:,} bytes; shrink the file with: "
        f"{command('threads', 'vacuum', db=db_flag(db, settings))})"
    )


@commands.command(
    "prune",
    epilog=examples(
        "threads prune --keep-last-turns 20 --dry-run",
        "threads prune --keep-last-turns 20 --older-than 90 --json",
    ),
)
def threads_prune(
    ctx: typer.Context,
    keep_last_turns: Annotated[
        int | None,
        typer.Option(
            "--keep-last-turns",
            min=1,
            metavar="N",
            help="Keep each thread's last N turns (and what they need).",
        ),
    ] = None,
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            min=0,
            metavar="DAYS",
            help="Delete whole threads not updated for DAYS days.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would go; delete nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    db: DbOption = None,
) -> None:
    """Delete old checkpoints that no kept checkpoint needs.

    Every kept checkpoint still loads exactly as before; a thread being written is skipped."""
    io: Invocation = ctx.obj
    from app.service.maintenance import prune

    with opened(db) as (_, database):
        report = prune(
            database,
            keep_last_turns=keep_last_turns,
            older_than_days=older_than,
            dry_run=dry_run,
        )
    if as_json:
        io.print_json(report.as_dict(), default=str)
        return
    verb = "would delete" if dry_run else "deleted"
    for item in report.threads:
        whole = " (whole thread)" if item.thread_deleted else ""
        io.err.print(
            f"{item.thread_id}: {verb} {item.checkpoints_deleted} checkpoints, "
            f"{item.writes_deleted} writes{whole}",
            markup=False,
        )
    for skipped in report.skipped:
        io.err.print(f"{skipped.thread_id}: skipped, {skipped.reason}", markup=False)
    io.err.print(
        f"{verb} {report.checkpoints_deleted} checkpoints and {report.writes_deleted} writes in "
        f"{len(report.threads)} of {report.threads_examined} threads (~{report.bytes_freed:,} bytes)"
    )


@commands.command("vacuum", epilog=examples("threads vacuum"))
def threads_vacuum(ctx: typer.Context, db: DbOption = None) -> None:
    """Give freed space back: VACUUM the database.

    SQLite: fold the WAL in and VACUUM the file. PostgreSQL: VACUUM the checkpoint tables."""
    io: Invocation = ctx.obj
    from app.service.maintenance import vacuum

    with opened(db) as (settings, database):
        report = vacuum(database)
    io.err.print(
        f"{settings.database.label}: {report.bytes_before:,} → {report.bytes_after:,} bytes "
        f"({report.bytes_freed:,} freed)",
        markup=False,
    )
    if report.note:
        io.err.print(report.note, markup=False)


def _missing(path: Path) -> bool:
    """No file there (a path that cannot even be looked at is left to open_database to report)."""
    try:
        return not path.exists()
    except OSError:
        return False


def _confirmed(question: str, yes: bool) -> bool:
    """--yes, or the person's answer. Without a terminal to ask, a usage error (exit 2): the
    command cannot do what it was told. A "no" is not an error: the person chose, and nothing
    changed (exit 0), as when they decline a replay."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError("refusing to delete without confirmation; pass --yes")
    return typer.confirm(question, default=False)
