"""What one invocation of the CLI shares with its commands: its two consoles and --debug.

It travels as click's context object (`ctx.obj`), made by the error boundary (`app.__main__`) for
each run, so nothing is kept between two runs in one process. rich reads COLUMNS, NO_COLOR and
whether its stream is a terminal when a Console is made, which is why each run makes its own."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.highlighter import JSONHighlighter
from rich.text import Text

from app.text import json_shown

if TYPE_CHECKING:
    from app.config import Settings
    from graphs.spec import RunSpec


def _console(*, stderr: bool) -> Console:
    # emoji=False: ":smile:" in a model's or a tool's text is shown as written (the renderer
    # writes streamed tokens as they are, app/cli/render.py).
    console = Console(stderr=stderr, emoji=False)
    console.soft_wrap = not wraps(console)
    return console


def wraps(console: Console) -> bool:
    """Whether prose is wrapped between words at the console's width: on a terminal, or when
    COLUMNS names a width. Piped with no COLUMNS, lines are written whole, so a script reads an
    answer as the model wrote it (rich would otherwise wrap it at 80)."""
    return console.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit()


@dataclass
class Invocation:
    """`out` gets what a command produces (answers, tables, JSON), `err` everything else."""

    out: Console = field(default_factory=lambda: _console(stderr=False))
    err: Console = field(default_factory=lambda: _console(stderr=True))
    debug: bool = False

    def print_json(self, data: Any, **dumps: Any) -> None:
        """`data` as JSON indented by two, on stdout: highlighted on a terminal; piped, the same
        text written as is (rich's highlighter took a third of a second over 1,000 threads, for
        a program that only parses it). `dumps` go to json.dumps (`default=str`)."""
        text = json_shown(json.dumps(data, indent=2, ensure_ascii=False, **dumps))
        if self.out.is_terminal:  # highlighted as rich's print_json does, without re-encoding
            self.out.print(JSONHighlighter()(Text(text)), soft_wrap=True)
            return
        self.out.file.write(text + "\n")
        self.out.file.flush()


def load_settings(**overrides: object) -> Settings:
    """Settings for a command; pydantic-settings is imported only when a command runs, which keeps
    `--help` fast."""
    from app.config import load_settings as load

    return load(**overrides)


def run_spec(**choices: Any) -> RunSpec:
    """The run settings a command's flags chose (None: left out, so the environment's hold)."""
    from pydantic import ValidationError

    from app.errors import UsageError
    from graphs.spec import RunSpec

    try:
        return RunSpec(**choices)
    except ValidationError as exc:
        problem = exc.errors()[0]
        flag = "--" + str(problem["loc"][0]).replace("_", "-")
        raise UsageError(f"invalid {flag}: {problem['msg']}") from None
