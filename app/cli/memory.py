"""`memory` commands: list, search and forget what the agent remembers across threads."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from app.cli.io import Invocation, load_settings
from app.cli.options import DbOption, JsonOption, command_group, examples
from app.errors import UsageError
from app.text import shown

if TYPE_CHECKING:
    from tools.memory.item import Kind

commands = command_group(
    help="Long-term memory: saved facts and past experiences.",
    no_args_is_help=True,
)

UserOption = Annotated[
    str | None,
    typer.Option("--user", "-u", metavar="NAME", help="Whose memory (default: the OS user)."),
]
ExperiencesOption = Annotated[
    bool,
    typer.Option("--experiences", help="Past turns (task, tools, outcome) instead of saved facts."),
]


@commands.command("list", epilog=examples("memory list", "memory list --experiences --user alice"))
def memory_list(
    ctx: typer.Context,
    user: UserOption = None,
    as_json: JsonOption = False,
    experiences: ExperiencesOption = False,
    db: DbOption = None,
) -> None:
    """List what is remembered for a user, newest first."""
    io: Invocation = ctx.obj
    from app.service.memory import open_memory

    who = _user(user)
    kind = _kind(experiences)
    settings = load_settings(db=db)
    with open_memory(settings) as memory:
        items = memory.list(who, kind=kind)
    if as_json:
        _print_json(io, items)
    elif not items:
        io.err.print(f"nothing remembered for {who} yet", markup=False)
    else:
        io.out.print(_table(items))


@commands.command("search", epilog=examples("memory search 'favourite colour'"))
def memory_search(
    ctx: typer.Context,
    query: Annotated[
        str, typer.Argument(metavar="WORDS", help="Words to look for, e.g. 'favourite colour'.")
    ],
    user: UserOption = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100, metavar="N", help="At most N.")
    ] = 10,
    as_json: JsonOption = False,
    experiences: ExperiencesOption = False,
    db: DbOption = None,
) -> None:
    """Search a user's memory, most relevant first (BM25 over each entry's words)."""
    io: Invocation = ctx.obj
    from app.service.memory import open_memory

    who = _user(user)
    if not query.strip():
        raise UsageError("the query is empty; give words to look for, e.g. 'favourite colour'")
    settings = load_settings(db=db)
    with open_memory(settings) as memory:
        items = memory.search("experiences" if experiences else "memories", who, query, limit)
    if as_json:
        _print_json(io, items)
    elif not items:
        io.err.print(f"nothing remembered about {query[:80]!r} for {who}", markup=False)
    else:
        io.out.print(_table(items))


@commands.command("forget", epilog=examples("memory forget 'favourite colour' --yes"))
def memory_forget(
    ctx: typer.Context,
    key_or_query: Annotated[
        str,
        typer.Argument(
            metavar="KEY|WORDS",
            help="A key from `memory list`, or words every entry to forget contains.",
        ),
    ],
    user: UserOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    experiences: ExperiencesOption = False,
    db: DbOption = None,
) -> None:
    """Forget the entry with this key, or every entry containing all of these words."""
    io: Invocation = ctx.obj
    from app.service.memory import open_memory

    who = _user(user)
    if not key_or_query.strip():
        raise UsageError(
            "give a key (list them with: waypoint memory list), or words the entries to forget "
            "contain"
        )
    kind = _kind(experiences)
    settings = load_settings(db=db)
    with open_memory(settings) as memory:
        matches = memory.matching(who, key_or_query, kind)
        if not matches:
            raise UsageError(
                f"nothing in {who}'s memory matches {key_or_query[:80]!r}; list them with: "
                "waypoint memory list"
            )
        if not yes:
            if not sys.stdin.isatty():
                raise UsageError("refusing to forget without confirmation; pass --yes")
            io.err.print(_table(matches))
            if not typer.confirm(f"Forget {_count(matches)}?", default=False):
                raise typer.Exit(1)
        forgotten = memory.delete(kind, who, [item.key for item in matches])
    io.err.print(f"forgot {_count(forgotten)} of {who}", markup=False)


def _kind(experiences: bool) -> Kind:
    return "experiences" if experiences else "memories"


def _user(user: str | None) -> str:
    from app.service.memory import default_user, validate_user

    return default_user() if user is None else validate_user(user)


def _count(items: Sequence | int) -> str:
    n = items if isinstance(items, int) else len(items)
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _table(items: Sequence) -> Table:
    table = Table("key", "saved (UTC)", "text")
    for item in items:
        table.add_row(
            Text(shown(item.key, one_line=True)),
            f"{item.created_at:%Y-%m-%d %H:%M}",
            Text(shown(item.text)),
        )
    return table


def _print_json(io: Invocation, items: Sequence) -> None:
    io.print_json([item.as_dict() for item in items])
