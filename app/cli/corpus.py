"""`corpus` commands: add, list, remove and search the documents web_search looks in."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from app.config import Settings
from app.cli.hints import command
from app.cli.io import Invocation, load_settings
from app.cli.options import DbOption, JsonOption, command_group, examples
from app.cli.tables import human_bytes
from app.errors import ConfigError, UsageError
from app.text import shown

if TYPE_CHECKING:
    from tools.search import LocalIndex

commands = command_group(
    help="The local document corpus that the web_search tool searches.", no_args_is_help=True
)

MAX_SKIPS_SHOWN = 20
ADD_HINT = f"add documents with: {command('corpus', 'add', 'PATH')}"


@contextlib.contextmanager
def _corpus_errors(settings: Settings) -> Iterator[None]:
    """Corpus errors are written for the model; at the terminal they become usage/config errors."""
    from app.db.sqlite import database_error
    from tools.errors import ToolInputError
    from tools.search import CorpusDatabaseError, EmptyCorpusError, UnknownDocumentError

    try:
        yield
    except CorpusDatabaseError as exc:
        cause = exc.__cause__
        if isinstance(cause, sqlite3.DatabaseError):
            raise database_error(settings.corpus_path, cause) from cause
        raise ConfigError(str(exc)) from exc
    except EmptyCorpusError:
        raise UsageError(f"the corpus is empty; {ADD_HINT}") from None
    except (UnknownDocumentError, ToolInputError) as exc:
        raise UsageError(str(exc)) from None


def _index(db: str | None) -> tuple[Settings, LocalIndex]:
    from app.db.sqlite import connect
    from tools.search import LocalIndex

    settings = load_settings(db=db)
    corpus = settings.corpus_path  # the SQLite database, or a file of its own (see README)
    connect(corpus, settings.busy_timeout).close()  # vets the file like every other command
    return settings, LocalIndex(corpus, busy_timeout=settings.busy_timeout)


@commands.command("add", epilog=examples("corpus add notes/ handbook.md page.html"))
def corpus_add(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...", help="Files or directories (.txt .md .rst .html), recursively."
        ),
    ],
    db: DbOption = None,
) -> None:
    """Add documents to the corpus that web_search searches.

    A file added again is updated if it changed and left alone if not."""
    io: Invocation = ctx.obj
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}; nothing was added")
    settings, index = _index(db)
    with _corpus_errors(settings):
        report = index.add(paths)
    for outcome in [f for f in report.files if f.status != "skipped"]:
        detail = f" ({outcome.detail})" if outcome.detail else ""
        said = shown(f"{outcome.status:<9} {outcome.path}{detail}", one_line=True)
        io.out.print(said, markup=False, highlight=False)
    for outcome in report.skipped[:MAX_SKIPS_SHOWN]:
        said = shown(f"skipped   {outcome.path}: {outcome.detail}", one_line=True)
        io.out.print(said, markup=False, highlight=False)
    if len(report.skipped) > MAX_SKIPS_SHOWN:
        io.out.print(f"... and {len(report.skipped) - MAX_SKIPS_SHOWN} more skipped", markup=False)
    io.out.print(
        f"{len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped",
        highlight=False,
    )


@commands.command("list", epilog=examples("corpus list", "corpus list --json"))
def corpus_list(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """The documents: id, title, path, chunks, size, when added."""
    io: Invocation = ctx.obj
    settings, index = _index(db)
    with _corpus_errors(settings):
        documents = index.list()
    if as_json:
        io.print_json([asdict(d) for d in documents])
        return
    if not documents:
        io.out.print(f"the corpus is empty; {ADD_HINT}", markup=False)
        return
    table = Table("id", "title", "path", "chunks", "size", "added")
    for d in documents:
        table.add_row(
            str(d.id),
            escape(shown(d.title[:50], one_line=True)),
            escape(shown(d.path, one_line=True)),
            str(d.chunks),
            human_bytes(d.bytes),
            d.added_at,
        )
    io.out.print(table)


@commands.command("remove", epilog=examples("corpus remove handbook.md"))
def corpus_remove(
    ctx: typer.Context,
    path_or_id: Annotated[
        str,
        typer.Argument(
            metavar="ID|PATH",
            help="A document id or path (a directory removes everything in it).",
        ),
    ],
    db: DbOption = None,
) -> None:
    """Remove documents from the corpus (the files stay where they are)."""
    io: Invocation = ctx.obj
    settings, index = _index(db)
    with _corpus_errors(settings):
        removed = index.remove(path_or_id)
    io.out.print(f"removed {removed} document{'s' if removed != 1 else ''}", highlight=False)


@commands.command("search", epilog=examples("corpus search 'release checklist' --limit 3"))
def corpus_search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(metavar="WORDS", help="Words to look for.")],
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", min=1, max=20, metavar="N", help="How many results (1-20)."),
    ] = 5,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search the corpus as web_search does: best first, with snippets."""
    io: Invocation = ctx.obj
    from tools.search import format_results, no_match_message

    if not query.strip():
        raise UsageError("the query is empty; give a few words to search for")
    settings, index = _index(db)
    with _corpus_errors(settings):
        results = index.search(query, limit)
    if as_json:
        io.print_json([asdict(r) for r in results])
        return
    text = format_results(results) if results else no_match_message(query)
    io.out.print(shown(text), markup=False, highlight=False)
