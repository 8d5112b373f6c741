"""Waypoint's tools as an MCP server: `build_server` lists them with the same names, descriptions
and JSON schemas a chat model sees, and `run_stdio_server` serves them to an MCP client on stdio
(`mcp serve`). Loading other MCP servers' tools is mcp_tools.py."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool
    from mcp.server.lowlevel import Server

SERVER_NAME = "waypoint"


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
