"""Runs over HTTP: a ChatSession turn or replay in a worker thread, its events on an asyncio queue.

The worker reports either an error before the run started (the route answers with a 4xx/5xx JSON
body, e.g. 409 for a busy thread) or a stream of events. A client that disconnects only detaches:
the run finishes in the background under the thread's lock, so the thread stays consistent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from app import chat
from app.config import Settings
from app.db import database_of, lock_thread, open_database
from app.errors import AppError, UsageError
from app.runtime import open_runtime
from app.server.errors import ForbiddenError, error_body
from app.server.events import EventRenderer, sse
from app.threads import thread_graph
from app.timetravel import CheckpointIndex, state_at
from app.workspace_sync import WorkspaceReport, restore_workspace
from tools import side_effect_names

log = logging.getLogger("waypoint.server")
Job = Callable[[chat.ChatSession, EventRenderer], chat.TurnResult]


def server_policy(settings: Settings) -> str:
    """`ask` needs a person at a terminal; over HTTP nobody is asked, so it means `never`."""
    return "auto" if settings.approve == "auto" else "never"


def run_policy(settings: Settings, requested: str | None) -> str:
    policy = server_policy(settings)
    if requested == "auto" and policy != "auto":
        raise ForbiddenError(
            "this server refuses risky tool calls (approval policy never); start it with "
            "--approve auto (or APP_APPROVE=auto) to let requests auto-approve them"
        )
    return requested or policy


@dataclass
class RunStream:
    """Events of one run, handed from the worker thread to the event loop."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    detached: bool = False
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    stop: threading.Event = field(default_factory=threading.Event)

    def put(self, kind: str, item: object) -> None:
        if self.detached:
            return
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (kind, item))
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self.detached = True


class ActiveRuns:
    """The runs this server process is executing, by thread, so a request can stop one."""

    def __init__(self) -> None:
        self._stops: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def track(self, thread_id: str, stop: threading.Event) -> Iterator[None]:
        """Register a run for its duration; a second run on the thread (about to get 409) does
        not replace the first."""
        with self._lock:
            mine = self._stops.setdefault(thread_id, stop) is stop
        try:
            yield
        finally:
            if mine:
                with self._lock:
                    del self._stops[thread_id]

    def cancel(self, thread_id: str) -> bool:
        """Ask the thread's run to stop; False when this process runs nothing on it."""
        with self._lock:
            stop = self._stops.get(thread_id)
        if stop is not None:
            stop.set()
        return stop is not None


def _work(
    settings: Settings,
    thread_id: str,
    policy: str,
    job: Job,
    stream: RunStream,
    active: ActiveRuns,
    strategy: str | None = None,
) -> None:
    renderer = EventRenderer(lambda event: stream.put("event", event))
    try:
        with open_runtime(settings, approval=policy) as runtime:
            session = runtime.session(thread_id, strategy)
            session.stop = stream.stop
            with active.track(thread_id, stream.stop):
                status = _run_job(job, session, renderer)
            head = CheckpointIndex(database_of(runtime.saver), thread_id).head.checkpoint_id
        stream.put("end", {"thread_id": thread_id, "head": head, "status": status})
    except AppError as exc:
        stream.put("failed", exc)
    except Exception as exc:  # a bug: logged with its traceback, reported without it
        log.exception("run %s on thread %s failed", stream.run_id, thread_id)
        stream.put("failed", AppError(f"internal error: {type(exc).__name__}; see the server log"))


def _run_job(job: Job, session: chat.ChatSession, renderer: EventRenderer) -> str:
    """The run's final status; a cancelled run was closed like a turn stopped with Ctrl-C."""
    try:
        return job(session, renderer).status
    except chat.TurnInterrupted:
        renderer.notice("the run was cancelled; the thread was closed after the step in progress")
        return "cancelled"


async def start(
    settings: Settings,
    thread_id: str,
    policy: str,
    job: Job,
    active: ActiveRuns,
    strategy: str | None = None,
) -> AsyncIterator[bytes]:
    """Start the run; raise its error if it fails before its first event, else return its SSE.
    `strategy`: the graph to run (None: the thread's own, see ChatSession)."""
    stream = RunStream(asyncio.get_running_loop())
    worker = threading.Thread(
        target=_work,
        args=(settings, thread_id, policy, job, stream, active, strategy),
        name=f"run-{thread_id}",
    )
    worker.start()
    kind, first = await stream.queue.get()
    if kind == "failed":
        raise first
    return _sse(stream, thread_id, (kind, first))


async def _sse(stream: RunStream, thread_id: str, first: tuple) -> AsyncIterator[bytes]:
    try:
        yield sse("metadata", {"run_id": stream.run_id, "thread_id": thread_id})
        kind, item = first
        while True:
            if kind == "event":
                yield sse(item["event"], item)
            elif kind == "failed":
                yield sse("error", {"event": "error", **error_body(item)})
                yield sse("end", {"thread_id": thread_id, "status": "error"})
                return
            else:
                yield sse("end", item)
                return
            kind, item = await stream.queue.get()
    finally:
        stream.detached = True  # a disconnected client: the run goes on without it


def turn_job(text: str) -> Job:
    return lambda session, renderer: session.run_turn(text, renderer)


def replay_job(settings: Settings, request) -> Job:  # type: ignore[no-untyped-def]
    """Replay from a checkpoint; the workspace is restored first, as the CLI does. Tools with side
    effects run again only with `confirm`; otherwise the branch stops before them and says why."""

    def job(session: chat.ChatSession, renderer: EventRenderer) -> chat.TurnResult:
        checkpoint_id, workspace = _prepare_replay(settings, session.thread_id, request)
        for line in workspace.lines():
            renderer.notice(f"workspace: {line}")

        def approve(calls: list) -> bool:
            if not request.confirm:
                names = ", ".join(c["name"] for c in calls)
                renderer.notice(f'{names} not re-run: send "confirm": true to allow it')
            return request.confirm

        # files changed outside Waypoint that the restore left alone are not written either
        return session.replay(checkpoint_id, renderer, approve, workspace.conflicts)

    return job


def _prepare_replay(settings: Settings, thread_id: str, request) -> tuple[str, WorkspaceReport]:  # type: ignore[no-untyped-def]
    from app.server.timeline import open_index, resolve

    with (
        open_database(settings.database, settings.busy_timeout) as database,
        lock_thread(settings.database, thread_id),
    ):
        index = open_index(database, thread_id)
        row = resolve(index, request.checkpoint_id)
        graph = thread_graph(database.saver, thread_id)
        start_state = state_at(graph, thread_id, row.checkpoint_id)
        if not request.confirm:
            risky = replay_would_rerun(settings, database.saver, thread_id, start_state)
            if risky:
                raise UsageError(
                    f"the replay would re-run tools with side effects ({', '.join(risky)}) at "
                    'once; send "confirm": true to allow it'
                )
        if request.keep_files:
            return row.checkpoint_id, WorkspaceReport()
        head = state_at(graph, thread_id, index.head.checkpoint_id)
        report = restore_workspace(
            settings.workspace,
            head.values.get("messages", []),
            start_state.values.get("messages", []),
            force=request.force,
        )
    return row.checkpoint_id, report


def replay_would_rerun(settings: Settings, saver, thread_id: str, start) -> list[str]:  # type: ignore[no-untyped-def]
    """The tools with side effects a replay from `start` would run at once: the calls waiting at
    the thread's strategy's gate (react: `tools`, plan: `executor`)."""
    from graphs.strategies import get_strategy, stored_strategy

    strategy = get_strategy(stored_strategy(saver, thread_id) or "react")
    if strategy.replay_gate is None or start.next != (strategy.replay_gate,):
        return []
    with open_runtime(settings) as runtime:
        side_effects = side_effect_names(runtime.context.tools)
    return [c["name"] for c in strategy.gate_calls(start.values) if c["name"] in side_effects]
