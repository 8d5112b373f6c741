"""`export` and `import`: a thread to and from a file (JSON, lossless; or Markdown)."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from app.cli.database import opened
from app.cli.hints import command, db_flag
from app.cli.io import Invocation
from app.cli.options import DbOption, ThreadOption, command_group, examples
from app.errors import UsageError
from app.text import json_shown

commands = command_group()


class ExportFormat(StrEnum):
    json = "json"
    md = "md"


@commands.command(
    epilog=examples(
        "export --thread demo -o demo.json",
        "export --thread demo --format md > demo.md",
    )
)
def export(
    ctx: typer.Context,
    thread: ThreadOption,
    format: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="json (lossless) or md.")
    ] = ExportFormat.json,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write to FILE, not stdout."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Export a thread as JSON (lossless) or Markdown.

    The JSON holds every branch and imports back exactly; Markdown is a readable transcript."""
    io: Invocation = ctx.obj
    from app.service import api

    with opened(db) as (_, database):
        if format is ExportFormat.md:
            text = api.export_markdown(database, thread)
        else:
            exported = api.export_thread(database, thread)
            text = json_shown(json.dumps(exported, ensure_ascii=False, indent=1)) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    write_atomically(output, text)
    io.err.print(f"exported thread {thread} to {output} ({len(text.encode()):,} bytes)")


def write_atomically(path: Path, text: str) -> None:
    """Write the file the user named. A regular file (or a new one) is replaced atomically via a
    temporary file beside it, so a full disk never leaves half a file; a symlink is written
    through to its target; a FIFO or character device (a pipe, /dev/stdout) is written to as it
    is, never replaced; anything else is refused. A refusal writes nothing."""
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode if target.exists() else None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
    if mode is None or stat.S_ISREG(mode):
        _replace_file(path, target, text)
    elif stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        _write_through(path, target, text)
    elif stat.S_ISDIR(mode):
        raise UsageError(f"{path} is a directory; give a file name with -o")
    else:
        raise UsageError(f"{path} is not a regular file, a pipe or a device; nothing was written")


def _replace_file(path: Path, target: Path, text: str) -> None:
    try:
        fd, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror}; nothing was written") from exc


def _write_through(path: Path, target: Path, text: str) -> None:
    try:
        with open(target, "w", encoding="utf-8") as handle:  # no O_CREAT race: it exists
            handle.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc


@commands.command("import", epilog=examples("import demo.json --as demo-copy --db other.sqlite"))
def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A JSON file made by `export`.")],
    as_: Annotated[
        str | None, typer.Option("--as", metavar="ID", help="Import under this thread id.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Import a thread exported as JSON, under its own id or --as ID."""
    io: Invocation = ctx.obj
    from app.service import api
    from app.service.archive import read_export_file

    data = read_export_file(file)
    thread = as_ or str(data.get("thread_id") or "")
    with opened(db) as (settings, database):
        report = api.import_thread(database, data, thread)
    io.err.print(
        f"imported thread [bold]{report.thread_id}[/bold]: {report.checkpoints} checkpoints, "
        f"{report.writes} writes; continue with: "
        f"{command('chat', '--thread', report.thread_id, db=db_flag(db, settings))}"
    )
    io.out.print(report.thread_id, markup=False)
