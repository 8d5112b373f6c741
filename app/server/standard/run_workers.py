"""The threads that run a server's runs, kept when idle: a run starts on an idle one, or on a new
one when none is idle, so a run never queues behind another (it may wait for an earlier run on its
thread) and no thread is started and torn down per run (~1-2 % of serve's CPU at 8 clients)."""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# Idle threads kept for the next runs (more than the runs a server usually runs at once); a thread
# that ends a run with this many idle already ends too, and so does one idle for IDLE_SECONDS
KEEP_IDLE = 16
IDLE_SECONDS = 60.0
IDLE_NAME = "run-idle"


class RunWorkers:
    """Run each job on a thread of its own for as long as it lasts, reusing idle threads."""

    def __init__(
        self,
        keep: int = KEEP_IDLE,
        on_retire: Callable[[], None] | None = None,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        """`on_retire`: called on a thread that ends (more than `keep` idle, idle `idle_seconds`,
        or `close`), to free what it kept (its runtime)."""
        self.keep = keep
        self.on_retire = on_retire
        self.idle_seconds = idle_seconds
        self._idle: list[queue.SimpleQueue[Callable[[], None] | None]] = []
        self._lock = threading.Lock()

    def start(self, job: Callable[[], None], name: str) -> None:
        """Run `job` on an idle thread (renamed `name` while it runs), else on a new one."""
        with self._lock:
            jobs = self._idle.pop() if self._idle else None
        if jobs is None:
            jobs = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(jobs,), name=name, daemon=True).start()
        # in a context of its own, as on a new thread: nothing a job set is seen by the next one
        jobs.put(lambda: contextvars.Context().run(_named, job, name))

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """End the idle threads (the server stops); a running job ends on its own."""
        with self._lock:
            idle, self._idle = self._idle, []
        for jobs in idle:
            jobs.put(None)

    def _serve(self, jobs: queue.SimpleQueue[Callable[[], None] | None]) -> None:
        while (job := self._next(jobs)) is not None:
            try:
                job()
            except BaseException:  # a job handles its own errors; this is a bug in one
                log.exception("a run's worker failed")
            with self._lock:
                retire = len(self._idle) >= self.keep
                if not retire:
                    self._idle.append(jobs)
            if retire:
                break
        if self.on_retire is not None:
            contextvars.Context().run(self.on_retire)

    def _next(
        self, jobs: queue.SimpleQueue[Callable[[], None] | None]
    ) -> Callable[[], None] | None:
        """The thread's next job; None when it was idle `idle_seconds` (and nobody took it
        meanwhile) or is told to end."""
        try:
            return jobs.get(timeout=self.idle_seconds)
        except queue.Empty:
            with self._lock:
                if jobs in self._idle:
                    self._idle.remove(jobs)
                    return None
            return jobs.get()  # taken just now: its job is on the way


def _named(job: Callable[[], None], name: str) -> None:
    thread = threading.current_thread()
    thread.name = name
    try:
        job()
    finally:
        thread.name = IDLE_NAME
