"""A sign of life while a turn waits for the model or a tool: a spinner with the elapsed time on
stderr, drawn only when stderr is a terminal, and removed (not left behind) before anything else is
printed."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text


class Waiting:
    """The spinner's one line — a frame, what the turn waits for, and for how long — drawn afresh
    at every refresh. One `Text`, not a spinner beside a renderable (rich lays that out as a
    table, which cost more than the rest of a fast turn's rendering)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.label = ""
        self.since = clock()
        self.spinner = Spinner("dots", style="cyan")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        seconds = int(self.clock() - self.since)
        self.spinner.text = Text(f"{self.label} · {seconds}s", style="dim")
        line = self.spinner.render(console.get_time())
        assert isinstance(line, Text)  # a Text beside the frame: rich joins them into one Text
        line.no_wrap, line.overflow = True, "ellipsis"
        yield line


class Progress:
    """The spinner of one turn. `wait(label)` shows it (or says what it now waits for); `stop()`
    removes it, so the next line printed starts clean."""

    def __init__(
        self, console: Console, *, enabled: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.console = console
        self.enabled = enabled and console.is_terminal and not console.is_dumb_terminal
        self.waiting = Waiting(clock)
        self._live: Live | None = None

    @property
    def shown(self) -> bool:
        return self._live is not None

    def wait(self, label: str) -> None:
        if not self.enabled:
            return
        if label != self.waiting.label or self._live is None:
            self.waiting.label, self.waiting.since = label, self.waiting.clock()
        if self._live is None:
            self._live = Live(
                self.waiting,
                console=self.console,
                transient=True,
                refresh_per_second=8,
            )
            self._live.start(refresh=True)
        else:
            self.refresh()

    def refresh(self) -> None:
        """Draw it again now (the elapsed time moves on by itself between refreshes)."""
        if self._live is not None:
            self._live.refresh()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
