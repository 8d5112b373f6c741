"""LangGraph's thread pools, kept from one run to the next.

Every run of a compiled graph opens a thread pool for its background work (saving checkpoints and
writes: LangGraph's BackgroundExecutor takes it from langchain_core's `get_executor_for_config`)
and shuts it down when the run ends, so every turn starts and stops ~4 threads: 3–7% of a turn's
CPU with 8 processes on 2 cores (both ways running side by side on one machine). Here a run takes
an idle pool, or a new one, and gives it back when it ends: each run still has a pool of its own,
as large as LangGraph's would be, so nothing a run waits for queues behind another run's work. A
run that sets `max_concurrency` gets LangGraph's own pool.

`reuse_run_pools()` puts this in place of the function LangGraph's (private) executor module calls;
where that module is not there, runs keep their own pools.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import Any

KEEP_IDLE = 4  # pools kept between runs: a process rarely runs more turns at once


class RunPools:
    """Idle thread pools, one taken by each run for as long as it lasts."""

    def __init__(self, keep: int = KEEP_IDLE) -> None:
        self.keep = keep
        self._idle: list[Executor] = []
        self._lock = threading.Lock()
        self.own_pool: Callable[[Any], contextlib.AbstractContextManager[Executor]] | None = None

    @contextlib.contextmanager
    def executor_for(self, config: Any) -> Iterator[Executor]:
        """`get_executor_for_config`, with the pool kept when the run ends. LangGraph waits for
        every task of the run before it leaves this block, so the pool given back is idle."""
        if self.own_pool is not None and (config or {}).get("max_concurrency") is not None:
            with self.own_pool(config) as executor:
                yield executor
            return
        pool = self._take()
        try:
            yield pool
        finally:
            self._give_back(pool)

    def forget_idle(self) -> None:
        """Drop the idle pools without waiting (a forked child: their threads are not in it)."""
        self._lock = threading.Lock()
        self._idle = []

    def _take(self) -> Executor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        from langchain_core.runnables.config import ContextThreadPoolExecutor

        return ContextThreadPoolExecutor(thread_name_prefix="waypoint-run")

    def _give_back(self, pool: Executor) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(pool)
                return
        pool.shutdown(wait=True)


POOLS = RunPools()


def reuse_run_pools() -> bool:
    """Make this process's graph runs reuse thread pools (once; later calls do nothing). False
    where the installed LangGraph has no such module to hook (runs keep their own pools)."""
    try:
        from langgraph.pregel import _executor
    except ImportError:  # pragma: no cover - another langgraph
        return False
    hooked = getattr(_executor, "get_executor_for_config", None)
    if hooked is None:  # pragma: no cover - another langgraph
        return False
    if hooked != POOLS.executor_for:
        POOLS.own_pool = hooked
        _executor.get_executor_for_config = POOLS.executor_for
        os.register_at_fork(after_in_child=POOLS.forget_idle)
    return True
