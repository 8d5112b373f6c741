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

from app.cli import DbOption, ThreadOption, app, err, out
from app.config import load_settings
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
    from app.store import open_checkpointer, validate_thread_id

    validate_thread_id(thread)
    settings = load_settings(db=db)
    with open_checkpointer(settings.db, settings.busy_timeout) as saver:
        if format is ExportFormat.md:
            text = export_markdown(saver, thread)
        else:
            text = json.dumps(export_thread(saver, thread), ensure_ascii=False, indent=1) + "\n"
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
    from app.store import ThreadLock, open_checkpointer, validate_thread_id

    data = read_export_file(file)
    thread = as_ or str(data.get("thread_id") or "")
    validate_thread_id(thread)
    settings = load_settings(db=db)
    with (
        open_checkpointer(settings.db, settings.busy_timeout) as saver,
        ThreadLock(settings.db, thread),
    ):
        report = import_thread(saver, data, thread)
    err.print(
        f"imported thread [bold]{report.thread_id}[/bold]: {report.checkpoints} checkpoints, "
        f"{report.writes} writes; continue with: python -m app chat --thread {report.thread_id}"
    )
    out.print(report.thread_id, markup=False)
