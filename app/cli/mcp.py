"""`mcp serve` (Waypoint's tools as an MCP stdio server) and `mcp list` (check an MCP config)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from app.cli.io import Invocation, load_settings
from app.cli.options import JsonOption, command_group, examples
from app.service.mcp_server import build_server, run_stdio_server
from app.service.mcp_tools import open_mcp_tools

if TYPE_CHECKING:
    pass

commands = command_group(
    help="Model Context Protocol: serve the tools, or check a config.",
    no_args_is_help=True,
)

McpConfigOption = Annotated[
    Path,
    typer.Option(
        "--mcp-config",
        metavar="FILE",
        help='MCP servers as JSON: {"mcpServers": {"name": {"command": ...}}}.',
    ),
]


@commands.command("serve", epilog=examples("mcp serve --workspace ./workspace"))
def serve(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            metavar="DIR",
            help="Directory the file tools may use (env APP_WORKSPACE).",
        ),
    ] = None,
) -> None:
    """Serve Waypoint's tools over stdio to an MCP client.

    The client starts this command itself."""
    io: Invocation = ctx.obj
    from tools import default_tools

    settings = load_settings(workspace=workspace)
    server = build_server(default_tools(settings.workspace))
    if sys.stdin.isatty():
        io.err.print(
            "[dim]waiting for an MCP client on stdin; MCP clients start this command themselves[/dim]"
        )
    run_stdio_server(server)


@commands.command("list", epilog=examples("mcp list --mcp-config servers.json"))
def list_configured_tools(
    ctx: typer.Context, mcp_config: McpConfigOption, as_json: JsonOption = False
) -> None:
    """Start the servers of an MCP config and list their tools.

    A quick check of the config."""
    io: Invocation = ctx.obj
    with open_mcp_tools(mcp_config) as tools:
        rows = [
            {
                "server": meta["mcp_server"],
                "name": tool.name,
                "mcp_name": meta["mcp_tool"],
                "trusted": meta["trusted"],
                "description": tool.description,
                "input_schema": tool.args_schema,
            }
            for tool in tools
            if (meta := tool.metadata) is not None  # the loader gives every MCP tool its own
        ]
    if as_json:
        io.print_json(rows)
        return
    if not rows:
        io.out.print("no MCP servers configured (or all are disabled)")
        return
    table = Table("server", "tool", "trusted", "arguments", "description")
    for row in rows:
        table.add_row(
            escape(row["server"]),
            escape(row["name"]),
            "yes" if row["trusted"] else "no",
            escape(", ".join(row["input_schema"].get("properties", {}))),
            escape((row["description"].splitlines() or [""])[0][:80]),
        )
    io.out.print(table)
