"""The `waypoint` command line: the root Typer app and its commands, each group in its own module.

Commands are thin: parse → Settings → service call → render → exit code. Each module builds its own
`commands` Typer; this module only assembles them, so no command module imports another."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli import chat, corpus, info, mcp, memory, serve, store, threads, time_travel, users
from app.cli.io import Invocation
from app.cli.options import command_group, examples

app = command_group(
    help="Waypoint: a LangGraph agent for the terminal whose every step is a durable checkpoint.",
    epilog=examples(
        "chat --thread demo",
        "chat --thread demo -m 'what is 6 times 7'",
        "history --thread demo",
        "threads list",
        "doctor",
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main_options(
    ctx: typer.Context,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of internal errors.")
    ] = False,
) -> None:
    if ctx.obj is None:  # invoked without the error boundary (typer's test runner)
        ctx.obj = Invocation()
    ctx.obj.debug = debug


for group in (chat, time_travel, store, info, serve):
    app.add_typer(group.commands)
app.add_typer(threads.commands, name="threads")
app.add_typer(memory.commands, name="memory")
app.add_typer(corpus.commands, name="corpus")
app.add_typer(mcp.commands, name="mcp")
app.add_typer(users.commands, name="users")
