"""Commands that move or remove stored threads: export, import, threads delete / prune / vacuum."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from app.cli import DbOption, ThreadOption, app, err, load_settings, out, threads_app
from app.errors import UsageError


class ExportFormat(StrEnum):
    json = "json"
    md = "md"


@app.command()
def export(
    thread: ThreadOption,
    format: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="json (lossless) or md.")
    ] = ExportFormat.json,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Export a thread: every checkpoint and branch as JSON (re-importable), or a Markdown transcript."""
    from app.archive import export_markdown, export_thread
    from app.db import open_database
    from app.store import validate_thread_id

    validate_thread_id(thread)
    settings = load_settings(db=db)
    with open_database(settings.database, settings.busy_timeout) as database:
        if format is ExportFormat.md:
            text = export_markdown(database, thread)
        else:
            text = json.dumps(export_thread(database, thread), ensure_ascii=False, indent=1) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    write_atomically(output, text)
    err.print(f"exported thread {thread} to {output} ({len(text.encode()):,} bytes)")


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory, so a full disk never leaves half a file."""
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give a file name with -o")
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror}; nothing was written") from exc


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="A JSON file made by `export`.")],
    as_: Annotated[str | None, typer.Option("--as", help="Import under this thread id.")] = None,
    db: DbOption = None,
) -> None:
    """Import a thread exported as JSON, under its own id or --as NEW; every checkpoint comes back."""
    from app.archive import import_thread, read_export_file
    from app.db import lock_thread, open_database
    from app.store import validate_thread_id

    data = read_export_file(file)
    thread = as_ or str(data.get("thread_id") or "")
    validate_thread_id(thread)
    settings = load_settings(db=db)
    with (
        open_database(settings.database, settings.busy_timeout) as database,
        lock_thread(settings.database, thread),
    ):
        report = import_thread(database, data, thread)
    err.print(
        f"imported thread [bold]{report.thread_id}[/bold]: {report.checkpoints} checkpoints, "
        f"{report.writes} writes; continue with: python -m app chat --thread {report.thread_id}"
    )
    out.print(report.thread_id, markup=False)


@threads_app.command("delete")
def threads_delete(
    thread: Annotated[str, typer.Argument(help="The thread to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = None,
) -> None:
    """Delete a thread: every checkpoint and write (workspace files are left alone)."""
    from app.db import lock_thread, open_database
    from app.maintenance import delete_thread
    from app.store import validate_thread_id
    from app.threads import thread_exists

    validate_thread_id(thread)
    settings = load_settings(db=db)
    with (
        open_database(settings.database, settings.busy_timeout) as database,
        lock_thread(settings.database, thread),
    ):
        if not thread_exists(database, thread):
            raise UsageError(f"thread {thread} does not exist; see `threads list`")
        _confirm(f"Delete thread {thread} and all its checkpoints?", yes)
        report = delete_thread(database, thread)
    err.print(
        f"deleted thread {thread}: {report.checkpoints} checkpoints, {report.writes} writes "
        f"({report.bytes_freed:,} bytes; run `threads vacuum` to shrink the file)"
    )


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError("refusing to delete without confirmation; pass --yes")
    if not typer.confirm(question, default=False):
        raise typer.Exit(1)


@threads_app.command("prune")
def threads_prune(
    keep_last_turns: Annotated[
        int | None,
        typer.Option(
            "--keep-last-turns", min=1, help="Keep each thread's last N turns (and what they need)."
        ),
    ] = None,
    older_than: Annotated[
        float | None,
        typer.Option("--older-than", min=0, help="Delete whole threads not updated for DAYS days."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would go; delete nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    db: DbOption = None,
) -> None:
    """Delete old checkpoints and writes that no kept checkpoint needs; every kept one still loads."""
    from app.db import open_database
    from app.maintenance import prune

    settings = load_settings(db=db)
    with open_database(settings.database, settings.busy_timeout) as database:
        report = prune(
            database,
            keep_last_turns=keep_last_turns,
            older_than_days=older_than,
            dry_run=dry_run,
        )
    if as_json:
        out.print_json(json.dumps(report.as_dict(), ensure_ascii=False, default=str))
        return
    verb = "would delete" if dry_run else "deleted"
    for item in report.threads:
        whole = " (whole thread)" if item.thread_deleted else ""
        err.print(
            f"{item.thread_id}: {verb} {item.checkpoints_deleted} checkpoints, "
            f"{item.writes_deleted} writes{whole}",
            markup=False,
        )
    for skipped in report.skipped:
        err.print(f"{skipped.thread_id}: skipped, {skipped.reason}", markup=False)
    err.print(
        f"{verb} {report.checkpoints_deleted} checkpoints and {report.writes_deleted} writes in "
        f"{len(report.threads)} of {report.threads_examined} threads (~{report.bytes_freed:,} bytes)"
    )


@threads_app.command("vacuum")
def threads_vacuum(db: DbOption = None) -> None:
    """SQLite: fold the WAL in and VACUUM the file. PostgreSQL: VACUUM the checkpoint tables."""
    from app.db import open_database
    from app.maintenance import vacuum

    settings = load_settings(db=db)
    with open_database(settings.database, settings.busy_timeout) as database:
        report = vacuum(database)
    err.print(
        f"{settings.database.label}: {report.bytes_before:,} → {report.bytes_after:,} bytes "
        f"({report.bytes_freed:,} freed)",
        markup=False,
    )
    if report.note:
        err.print(report.note, markup=False)
