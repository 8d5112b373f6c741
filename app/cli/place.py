"""Where a session's data is and which model answers: what the REPL and `serve` say when they start."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from app.models.notice import OFFLINE_NOTICE

if TYPE_CHECKING:
    from app.config import Settings


def model_notice(spec: str) -> str:
    return OFFLINE_NOTICE if spec == "offline" else f"{spec} (OpenAI-compatible endpoint)"


def place_grid(settings: Settings, title: str = "/help for commands", **more: str) -> Group:
    """'Waypoint · TITLE', then the database, the workspace, the model and any `more` rows, each
    value wrapping under itself."""
    place = Table.grid(padding=(0, 1))
    place.add_column(style="dim", no_wrap=True)
    place.add_column(overflow="fold")
    place.add_row("database", settings.database.label)
    place.add_row("workspace", str(settings.workspace))
    place.add_row("model", model_notice(settings.model_spec))
    for name, value in more.items():
        place.add_row(name, value)
    return Group(Text.assemble(("Waypoint", "bold"), f" · {title}"), place)
