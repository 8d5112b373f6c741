"""`users` commands: the HTTP server's users and their tokens (add, list, revoke), kept in the
users file (APP_USERS_FILE, else users.json in the data directory) as hashes only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.io import Invocation, load_settings
from app.cli.options import command_group, examples

commands = command_group(
    help="The HTTP server's users and their tokens.",
    no_args_is_help=True,
)

NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", help="The user (also their memory's name), e.g. alice.")
]


def users_file() -> Path:
    """APP_USERS_FILE, else users.json beside the default database (the data directory)."""
    from app.config import default_users_file

    return load_settings().users_file or default_users_file()


@commands.command("add", epilog=examples("users add alice", "users add alice --replace"))
def users_add(
    ctx: typer.Context,
    name: NameArgument,
    replace: Annotated[
        bool, typer.Option("--replace", help="Give the user a new token (the old one stops).")
    ] = False,
) -> None:
    """Add a user and print their new token (shown once: only its hash is kept)."""
    io: Invocation = ctx.obj
    from app.server.tokens import add_user

    path = users_file()
    token = add_user(path, name, replace=replace)
    io.err.print(f"token for {name} (shown once; kept in {path} as a hash):", markup=False)
    io.out.print(token, markup=False, highlight=False, soft_wrap=True)


@commands.command("list", epilog=examples("users list"))
def users_list(ctx: typer.Context) -> None:
    """List the users (names and when their token was made; never the tokens)."""
    io: Invocation = ctx.obj
    from app.server.tokens import read_users

    path = users_file()
    users = read_users(path)
    if not users:
        io.err.print(f"no users in {path}; add one with: waypoint users add NAME", markup=False)
        return
    for user in sorted(users.values(), key=lambda u: u.name):
        io.out.print(f"{user.name}  (token made {user.created_at})", markup=False, highlight=False)


@commands.command("revoke", epilog=examples("users revoke alice"))
def users_revoke(ctx: typer.Context, name: NameArgument) -> None:
    """Remove a user: their token stops working at once (a running server rereads the file)."""
    io: Invocation = ctx.obj
    from app.server.tokens import revoke_user

    path = users_file()
    revoke_user(path, name)
    io.err.print(f"revoked {name}'s token", markup=False)
