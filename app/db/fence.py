"""A run's writes end when the run is abandoned.

A graph run streams in a worker thread (app/service/worker.py). When the user presses Ctrl-C the
terminal closes the turn at once, but the worker may be inside a step (a tool still running) and
would otherwise commit that step later, after the close, as the thread's new head: a second writer
on a thread whose lock its session has already let go.

So each run carries a Fence in its config (`fenced`: a configurable key that LangGraph passes,
with the thread id, to every write of the run, from whichever thread makes it, subgraphs included,
and keeps out of the checkpoint metadata), and the savers (`FencedWrites`) write only while it is
open. Closing the fence waits for a write in progress and refuses every later one, so once `close`
returns nothing of the run reaches the database.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

FENCE_KEY = "__waypoint_fence"  # "__": LangGraph copies other configurable keys into metadata


class RunAbandoned(Exception):
    """The run's fence is closed: its writes are refused."""


class Fence:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False

    @contextlib.contextmanager
    def open_for_write(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise RunAbandoned("the run was stopped; its later steps are not written")
            yield

    def close(self) -> None:
        """From now on nothing is written under this fence (a write in progress finishes first)."""
        with self._lock:
            self._closed = True


def fenced(config: RunnableConfig, fence: Fence) -> RunnableConfig:
    """`config` for a run whose writes end when `fence` closes."""
    return _with_configurable(config, {**config.get("configurable", {}), FENCE_KEY: fence})


def unfenced(config: Any) -> Any:
    """`config` (a streamed checkpoint's) without the run's fence: a config kept after the run (a
    remembered head) must not carry a fence that closes with the run."""
    if not isinstance(config, dict) or FENCE_KEY not in config.get("configurable", {}):
        return config
    configurable = {k: v for k, v in config["configurable"].items() if k != FENCE_KEY}
    return _with_configurable(RunnableConfig(**config), configurable)


def _with_configurable(config: RunnableConfig, configurable: dict[str, Any]) -> RunnableConfig:
    copy = config.copy()
    copy["configurable"] = configurable
    return copy


@contextlib.contextmanager
def _open_for(config: Any) -> Iterator[None]:
    fence = ((config or {}).get("configurable") or {}).get(FENCE_KEY)
    if not isinstance(fence, Fence):
        yield
        return
    with fence.open_for_write():
        yield


class FencedWrites:
    """Mixin for a LangGraph saver class: `put` and `put_writes` refuse a closed run's writes.
    (Their signatures are the savers' own: LangGraph reads `put_writes`'s to pass `task_path`.)"""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        with _open_for(config):
            # a mixin: the saver class it is mixed into has `put`
            return super().put(config, checkpoint, metadata, new_versions)  # type: ignore[misc]

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        with _open_for(config):
            # a mixin: the saver class it is mixed into has `put_writes`
            super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]
