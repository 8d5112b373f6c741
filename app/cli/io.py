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
    # The SIGINT handler before `answer_kept` ignored Ctrl-C (restored when the run ends).
    sigint_before: Any = None

    def answer_kept(self) -> None:
        """The turn's answer is completely written (flushed here) and saved: the turn is done, so
        from now on a Ctrl-C has nothing left to stop and is ignored, and the exit status stays the
        turn's. The rule (issue 32): a one-shot exits 0 only when its answer was written and saved
        before the signal; a Ctrl-C any earlier exits 130."""
        import signal
        import threading

        for console in (self.out, self.err):
            console.file.flush()
        if threading.current_thread() is threading.main_thread() and self.sigint_before is None:
            self.sigint_before = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def restore_sigint(self) -> None:
        """Undo `answer_kept`'s ignoring, for a caller that goes on running (tests run many
        commands in one process)."""
        import signal

        if self.sigint_before is not None:
            signal.signal(signal.SIGINT, self.sigint_before)
            self.sigint_before = None

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
