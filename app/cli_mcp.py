"""`mcp serve` (Waypoint's tools as an MCP stdio server) and `mcp list` (check an MCP config)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from app.cli import JsonOption, app, err, load_settings, out
from app.mcp_tools import open_mcp_tools

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool
    from mcp.server.lowlevel import Server

SERVER_NAME = "waypoint"

mcp_app = typer.Typer(
    help="Model Context Protocol: serve Waypoint's tools, or check an MCP config.",
    no_args_is_help=True,
)
app.add_typer(mcp_app, name="mcp")

McpConfigOption = Annotated[
    Path,
    typer.Option(
        "--mcp-config", help='MCP servers as JSON: {"mcpServers": {"name": {"command": ...}}}.'
    ),
]


@mcp_app.command("serve")
def serve(
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Directory the file tools may use (env APP_WORKSPACE)."),
    ] = None,
) -> None:
    """Serve Waypoint's tools over stdio to an MCP client (the client starts this command)."""
    from tools import default_tools

    settings = load_settings(workspace=workspace)
    server = build_server(default_tools(settings.workspace))
    if sys.stdin.isatty():
        err.print(
            "[dim]waiting for an MCP client on stdin; MCP clients start this command themselves[/dim]"
        )
    run_stdio_server(server)


def build_server(tools: list[BaseTool]) -> Server:
    """An MCP server whose tools are `tools`: same names, descriptions and JSON schemas."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server
    from pydantic import ValidationError

    from graphs.shared.tool_calls import invalid_arguments_message, unknown_tool_message
    from tools import has_side_effects
    from tools.errors import ToolError

    by_name = {tool.name: tool for tool in tools}
    listing = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            inputSchema=input_schema(tool),
            annotations=types.ToolAnnotations(readOnlyHint=not has_side_effects(tool)),
        )
        for tool in tools
    ]
    server: Server = Server(SERVER_NAME, version=_version())

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return listing

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        tool = by_name.get(name)
        if tool is None:
            return _error_result(types, unknown_tool_message(name, by_name))
        try:
            result = await anyio.to_thread.run_sync(tool.invoke, arguments)
        except ToolError as exc:
            return _error_result(types, str(exc))
        except ValidationError as exc:
            return _error_result(types, invalid_arguments_message(name, exc, tool))
        text = result if isinstance(result, str) else str(result)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return server


def _error_result(types: Any, message: str) -> Any:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


def input_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of the tool's arguments exactly as a chat model is shown it."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(tool)["function"]["parameters"]


def run_stdio_server(server: Server) -> None:
    """Serve until the client closes stdin."""
    import anyio
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        # The SDK's default wrappers close sys.stdout when garbage-collected, so the exit path could
        # no longer flush it; these wrap duplicates of the two descriptors instead.
        with (
            open(os.dup(sys.stdin.fileno()), encoding="utf-8", errors="replace") as stdin,
            open(os.dup(sys.stdout.fileno()), "w", encoding="utf-8") as stdout,
        ):
            streams = stdio_server(anyio.wrap_file(stdin), anyio.wrap_file(stdout))
            async with streams as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("waypoint")
    except PackageNotFoundError:
        return "0"


@mcp_app.command("list")
def list_configured_tools(mcp_config: McpConfigOption, as_json: JsonOption = False) -> None:
    """Start the servers of an MCP config and list their tools (a quick check of the config)."""
    with open_mcp_tools(mcp_config) as tools:
        rows = [
            {
                "server": tool.metadata["mcp_server"],
                "name": tool.name,
                "mcp_name": tool.metadata["mcp_tool"],
                "trusted": tool.metadata["trusted"],
                "description": tool.description,
                "input_schema": tool.args_schema,
            }
            for tool in tools
        ]
    if as_json:
        out.print_json(json.dumps(rows, ensure_ascii=False))
        return
    if not rows:
        out.print("no MCP servers configured (or all are disabled)")
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
    out.print(table)
