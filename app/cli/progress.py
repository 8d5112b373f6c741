"""A sign of life while a turn waits for the model or a tool: a spinner with the elapsed time on
stderr, drawn only when stderr is a terminal, and removed (not left behind) before anything else is
printed.

A wait shorter than `SHOW_AFTER_S` shows nothing: a spinner that flashes for a few milliseconds
before the first token says nothing and costs a render. One ticker thread per process draws the
spinners that are due (and moves the ones shown on), so a turn starts no thread of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

SHOW_AFTER_S = 0.1
TICK_S = 1 / 8
IDLE_EXIT_S = 0.5  # the ticker thread ends after this long with no spinner waiting


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
    """The spinner of one turn. `wait(label)` asks for it (or says what it now waits for): it is
    drawn once the wait has lasted `SHOW_AFTER_S`; `stop()` removes it, so the next line printed
    starts clean."""

    def __init__(
        self, console: Console, *, enabled: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.console = console
        self.enabled = enabled and console.is_terminal and not console.is_dumb_terminal
        self.waiting = Waiting(clock)
        self._wanted_since: float | None = None  # when the current wait began; None: not waiting
        self._live: Live | None = None
        self._lock = threading.Lock()  # the ticker's drawing against stop()

    @property
    def shown(self) -> bool:
        return self._live is not None

    def wait(self, label: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            if label != self.waiting.label or self._wanted_since is None:
                self.waiting.label, self.waiting.since = label, self.waiting.clock()
            if self._wanted_since is None:
                self._wanted_since = self.waiting.clock()
            if self._live is not None:
                self._live.refresh()
        TICKER.follow(self)

    def refresh(self) -> None:
        """Draw it now if it is due (the ticker does this every `TICK_S`)."""
        with self._lock:
            if self._wanted_since is None:
                return
            if self._live is not None:
                self._live.refresh()
            elif self.waiting.clock() - self._wanted_since >= SHOW_AFTER_S:
                # rich's own refresh thread stays off: the ticker refreshes it. Stray writes to
                # sys.stdout/sys.stderr (a library's warning) still go above it, as rich redirects.
                self._live = Live(
                    self.waiting, console=self.console, transient=True, auto_refresh=False
                )
                self._live.start(refresh=True)

    def stop(self) -> None:
        with self._lock:
            self._wanted_since = None
            if self._live is not None:
                self._live.stop()
                self._live = None
        TICKER.forget(self)


class Ticker:
    """The process's one drawing thread: while any spinner waits, it refreshes them every
    `TICK_S`. Started when a spinner first waits; it ends once none has waited for `IDLE_EXIT_S`
    (so a finished command has no thread of it left)."""

    def __init__(self) -> None:
        self._waiting: set[Progress] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def follow(self, progress: Progress) -> None:
        with self._changed:
            if progress in self._waiting:
                return
            self._waiting.add(progress)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="spinner", daemon=True)
                self._thread.start()
            self._changed.notify()

    def forget(self, progress: Progress) -> None:
        with self._changed:
            self._waiting.discard(progress)

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._waiting and not self._changed.wait_for(
                    lambda: bool(self._waiting), timeout=IDLE_EXIT_S
                ):
                    self._thread = None  # idle: the next spinner starts a new one
                    return
                due = list(self._waiting)
            for progress in due:
                progress.refresh()
            time.sleep(TICK_S)


TICKER = Ticker()
