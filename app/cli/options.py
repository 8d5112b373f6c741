"""Options that several commands share, declared once."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="SQLite file or postgresql://user@host:5432/dbname URL (env APP_DB)."
    ),
]
ThreadOption = Annotated[str, typer.Option("--thread", "-t", help="Thread id, e.g. demo.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class StreamStyle(StrEnum):
    tokens = "tokens"
    updates = "updates"
