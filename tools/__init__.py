"""The agent's tools, one module per family; `default_tools` is the registry the CLI uses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing `tools` (e.g. tools.sqlite_wal) must stay cheap: no LangChain here
    from langchain_core.tools import BaseTool

    from tools.search import SearchBackend


def has_side_effects(tool: BaseTool) -> bool:
    """Whether a call changes something outside the conversation, so that a replay asks before
    running it again: Waypoint's tools say so in `metadata["side_effects"]`; a tool of an MCP
    server has side effects unless the server marks it read-only (`readOnlyHint`)."""
    metadata = tool.metadata or {}
    if "mcp_server" in metadata:
        return not metadata.get("read_only", False)
    return bool(metadata.get("side_effects"))


def side_effect_names(tools: Iterable[BaseTool]) -> frozenset[str]:
    """The names of the tools among `tools` that have side effects."""
    return frozenset(tool.name for tool in tools if has_side_effects(tool))


def default_tools(
    workspace: Path,
    *,
    hidden: Sequence[Path] = (),
    search: SearchBackend | None = None,
    weather_backend: str = "offline",
) -> list[BaseTool]:
    """Calculator, weather, workspace files, the clock and sandboxed Python, bound to this
    workspace; the sandbox also hides `hidden` (e.g. the database directory). With a `search`
    backend, web_search too."""
    from tools.calculator import calculator
    from tools.clock_tool import current_time
    from tools.file_tools import make_file_tools
    from tools.files import Workspace
    from tools.sandbox import Sandbox, make_python_tool
    from tools.weather_online import make_weather_tool

    python = make_python_tool(Sandbox(hide=(workspace, *hidden)))
    python.metadata = {
        **(python.metadata or {}),
        "risk": lambda args: "runs Python code",
        "side_effects": True,
    }
    weather = make_weather_tool(weather_backend)
    tools = [calculator, weather, *make_file_tools(Workspace(workspace)), current_time, python]
    if search is not None:
        from tools.search import make_search_tool

        tools.append(make_search_tool(search))
    return tools
