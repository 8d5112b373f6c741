"""The agent's tools, one module per family; `default_tools` is the registry the CLI uses."""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool

# Tools whose calls change something outside the conversation: replays ask before running them again.
SIDE_EFFECT_TOOLS = frozenset({"write_file", "edit_file"})


def default_tools(workspace: Path) -> list[BaseTool]:
    """Calculator, weather, workspace files and the clock, bound to this workspace directory."""
    from tools.calculator import calculator
    from tools.clock import current_time
    from tools.file_tools import make_file_tools
    from tools.files import Workspace
    from tools.weather import get_weather

    return [calculator, get_weather, *make_file_tools(Workspace(workspace)), current_time]
