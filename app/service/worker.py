"""A graph run in a worker thread, its events handed to the caller's thread in batches (`Handoff`).

The caller (the terminal) stays free to receive Ctrl-C at once, even while a tool blocks. When the
caller stops consuming (closes the stream), the run's fence closes (app/db/fence.py): the step the
worker was in is never committed, even if the worker finishes it later, so the caller can close the
interrupted turn itself at once.
"""

from __future__ import annotations

import collections
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import StreamMode

from app.db.fence import Fence, fenced, unfenced
from app.service.head import CHECKPOINTS_MODE
from graphs.shared.deadline import start_deadline, turn_seconds_left
from graphs.shared.skeleton import StrategyGraph
from graphs.state import AgentContext

STREAM_MODES: list[StreamMode] = ["updates", "messages", "custom"]  # what renderers see


class RunCancelled(Exception):
    """The run was asked to stop (`stop` was set) and its worker has stopped."""


BATCH_SECONDS = 0.02  # events wait at most this long for the caller (50 batches a second)


class Handoff:
    """Events from the worker to the caller. Waking the caller for each event (a queue does) made
    the two threads trade the GIL ~20 times in a fast turn (~0.6–1 ms of CPU); here the caller is
    woken by the first event after a quiet `BATCH_SECONDS`, by an `urgent` one (what the user may
    act on: a tool starting, a retry) and by the end of the run, and otherwise takes what has
    arrived every `BATCH_SECONDS`: tokens still reach the screen 50 times a second."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._items: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._woken_at = float("-inf")
        self._clock = clock

    def put(self, kind: str, item: Any, *, urgent: bool = False) -> None:
        self._items.append((kind, item))
        now = self._clock()
        if urgent or kind != "event" or now - self._woken_at >= BATCH_SECONDS:
            self._woken_at = now
            self._wake.set()

    def take(self) -> list[tuple[str, Any]]:
        """What has arrived, waiting up to `BATCH_SECONDS` for something (maybe nothing)."""
        self._wake.wait(BATCH_SECONDS)
        self._wake.clear()  # before draining: a wake-up set meanwhile is kept for the next take
        items = []
        while self._items:
            items.append(self._items.popleft())
        return items


def stream_in_worker(
    graph: StrategyGraph,
    graph_input: Any,
    config: RunnableConfig,
    context: Any,
    name: str,
    stop: threading.Event | None = None,
    *,
    values: bool = False,
    graph_modes: Collection[StreamMode] = (),
    tokens: bool = True,
    **options: Any,
) -> Generator[tuple[str, Any, tuple[str, ...]], None, None]:
    """(mode, payload, namespace) events of one run: the renderers' modes (with `values`, the whole
    state after each step too; with `graph_modes`, those of LangGraph's modes) plus the thread's
    own checkpoints. Without `tokens`, no `messages` mode: nobody reads the model's tokens, and a
    model that streams only when its tokens are listened to (LangChain's default) is called
    unstreamed, as LangGraph's server does for a run that did not ask for messages.
    Setting `stop` (from another thread) ends the run at the step in progress: the worker is waited
    for, so nothing of the run is written after RunCancelled is raised. Closing the stream (the
    consumer's Ctrl-C) does not wait for the worker, but nothing of the run is written after it."""
    events = Handoff()
    cancelled = threading.Event()
    fence = Fence()
    whole_state: list[StreamMode] = ["values"] if values else []
    renderers = STREAM_MODES if tokens else [mode for mode in STREAM_MODES if mode != "messages"]
    modes: list[StreamMode] = [*renderers, *whole_state, CHECKPOINTS_MODE]
    modes += [mode for mode in graph_modes if mode not in modes]

    def produce() -> None:
        try:
            # The worker's own thread: the deadline holds for the rest of it (--max-seconds).
            start_deadline(run_seconds_left(graph_input, context))
            # subgraphs=True: a strategy's tool-loop subgraph streams its tokens and cards too.
            for namespace, mode, payload in graph.stream(
                graph_input,
                fenced(config, fence),
                context=context,
                stream_mode=modes,
                durability="sync",
                subgraphs=True,
                **options,
            ):
                if cancelled.is_set() or (stop is not None and stop.is_set()):
                    events.put("stopped", None)  # at the step in progress: nothing more written
                    return
                if mode == CHECKPOINTS_MODE:
                    if namespace:
                        continue  # a subgraph's own checkpoints are never the thread's head
                    payload = without_fence(payload)
                elif mode == "debug":
                    payload = _debug_without_fence(payload)
                events.put("event", (mode, payload, namespace), urgent=mode == "custom")
        except BaseException as exc:  # handed to the consumer, which re-raises it
            events.put("error", exc)
        else:
            events.put("done", None)

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        while True:
            if stop is not None and stop.is_set():
                cancelled.set()
                worker.join()
                raise RunCancelled
            for kind, item in events.take():
                if stop is not None and stop.is_set():
                    break  # the caller stopped the run on an event of this batch: see above
                if kind == "done":
                    return
                if kind == "error":
                    raise item
                if kind == "stopped":
                    worker.join()
                    raise RunCancelled
                yield item
    finally:
        cancelled.set()
        fence.close()


def without_fence(checkpoint: Any) -> Any:
    """A streamed checkpoint as the caller keeps it: its configs without the run's fence."""
    if not isinstance(checkpoint, dict):
        return checkpoint
    return {
        **checkpoint,
        **{
            key: unfenced(checkpoint[key])
            for key in ("config", "parent_config")
            if key in checkpoint
        },
    }


def _debug_without_fence(item: Any) -> Any:
    """A `debug` item whose payload is a checkpoint carries the run's config: without its fence."""
    if not isinstance(item, dict) or item.get("type") != "checkpoint":
        return item
    return {**item, "payload": without_fence(item.get("payload"))}


def run_seconds_left(graph_input: Any, context: Any) -> float | None:
    """A new turn's time budget bounds every model request of its run: all of it for a turn
    that starts now (its first node begins it), what is left for one whose input says when it
    began."""
    if not isinstance(graph_input, dict) or not isinstance(context, AgentContext):
        return None
    if "turn_started_at" not in graph_input:
        return context.max_seconds
    return turn_seconds_left(graph_input, context)


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """A second Ctrl-C must not interrupt the write that makes the thread consistent again."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
