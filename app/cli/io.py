"""What one invocation of the CLI shares with its commands: its two consoles and --debug.

It travels as click's context object (`ctx.obj`), made by the error boundary (`app.__main__`) for
each run, so nothing is kept between two runs in one process. rich reads COLUMNS, NO_COLOR and
whether its stream is a terminal when a Console is made, which is why each run makes its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from app.config import Settings


def _console(*, stderr: bool) -> Console:
    return Console(stderr=stderr, soft_wrap=True)


@dataclass
class Invocation:
    """`out` gets what a command produces (answers, tables, JSON), `err` everything else."""

    out: Console = field(default_factory=lambda: _console(stderr=False))
    err: Console = field(default_factory=lambda: _console(stderr=True))
    debug: bool = False


def load_settings(**overrides: object) -> Settings:
    """Settings for a command; pydantic-settings is imported only when a command runs, which keeps
    `--help` fast."""
    from app.config import load_settings as load

    return load(**overrides)
