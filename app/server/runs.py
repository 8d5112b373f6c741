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

from langgraph.types import StateSnapshot

from app.config import Settings
from app.errors import AppError, UsageError
from app.server.errors import ForbiddenError, error_body
from app.server.events import EventQueue, sse
from app.service import api
from app.service.events import Notice
from app.service.replay import rerun_at_once
from app.service.runtime import Runtime, open_runtime
from app.service.session import ChatSession, TurnInterrupted, TurnResult
from tools import side_effect_names

log = logging.getLogger("waypoint.server")
Job = Callable[[Runtime, ChatSession, "EventQueue"], TurnResult]


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
    sink = EventQueue(lambda event: stream.put("event", event))
    try:
        with open_runtime(settings, approval=policy) as runtime:
            session = runtime.session(thread_id, strategy)
            session.stop = stream.stop
            with active.track(thread_id, stream.stop):
                status = _run_job(job, runtime, session, sink)
            head = api.checkpoints(runtime.database, thread_id).head.checkpoint_id
        stream.put("end", {"thread_id": thread_id, "head": head, "status": status})
    except AppError as exc:
        stream.put("failed", exc)
    except Exception as exc:  # a bug: logged with its traceback, reported without it
        log.exception("run %s on thread %s failed", stream.run_id, thread_id)
        stream.put("failed", AppError(f"internal error: {type(exc).__name__}; see the server log"))


def _run_job(job: Job, runtime: Runtime, session: ChatSession, sink: EventQueue) -> str:
    """The run's final status; a cancelled run was closed like a turn stopped with Ctrl-C."""
    try:
        return job(runtime, session, sink).status
    except TurnInterrupted:
        sink.emit(Notice("the run was cancelled; the thread was closed after the step in progress"))
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
    return lambda runtime, session, sink: session.run_turn(text, sink)


def replay_job(settings: Settings, request) -> Job:  # type: ignore[no-untyped-def]
    """Replay from a checkpoint; the workspace is restored first, as the CLI does. Tools with side
    effects run again only with `confirm`: a replay that would run them at once is refused before
    anything changes, and one that meets them later stops there and says why."""

    def job(runtime: Runtime, session: ChatSession, sink: EventQueue) -> TurnResult:
        start = api.prepare_replay(
            runtime.database,
            session.thread_id,
            request.checkpoint_id,
            workspace=None if request.keep_files else settings.workspace,
            force=request.force,
            check=None if request.confirm else _refuse_side_effects(session),
        )
        for line in start.workspace.lines():
            sink.emit(Notice(f"workspace: {line}"))

        def approve(calls: list) -> bool:
            if not request.confirm:
                names = ", ".join(c["name"] for c in calls)
                sink.emit(Notice(f'{names} not re-run: send "confirm": true to allow it'))
            return request.confirm

        # files changed outside Waypoint that the restore left alone are not written either
        return session.replay(start.row.checkpoint_id, sink, approve, start.spared)

    return job


def _refuse_side_effects(session: ChatSession):  # type: ignore[no-untyped-def]
    def check(start: StateSnapshot) -> None:
        risky = rerun_at_once(session.strategy, start, side_effect_names(session.context.tools))
        if risky:
            raise UsageError(
                f"the replay would re-run tools with side effects ({', '.join(risky)}) at "
                'once; send "confirm": true to allow it'
            )

    return check
