"""The tools of the MCP servers named in `--mcp-config`, open for as long as a run needs them."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


@contextmanager
def open_mcp_tools(
    config_file: Path | None, *, reserved_names: Collection[str] = ()
) -> Iterator[list[BaseTool]]:
    """The tools of the servers in `config_file` (none when it is None), closed on exit; any setup
    failure is a ConfigError for the person at the terminal."""
    if config_file is None:
        yield []
        return
    from tools.mcp import McpSetupError, load_mcp_config, load_mcp_tools

    try:
        toolset = load_mcp_tools(load_mcp_config(config_file), reserved_names=reserved_names)
    except McpSetupError as exc:
        raise ConfigError(str(exc)) from None
    with toolset:
        yield toolset
