"""Runs: a thread's turn (or its resumption, or a replay from a checkpoint) in a worker thread,
its events kept for whoever streams or joins it. Streamed (`runs/stream`), waited for
(`runs/wait`) or in the background (`runs`, then `join`, `get`, `list`, `cancel`).

A run goes through the same ChatSession as a terminal turn: the thread's lock, crash repair,
approvals as interrupts, Ctrl-C's close when it is cancelled. Runs on one thread follow each other:
`multitask_strategy` reject (409 while one runs), enqueue (wait for it: the default, as in
LangGraph) or interrupt (cancel it first), across every server on the database (their records).

Runs are records in the thread database (app/db/run_records.py): only live runs, with a bounded tail
of their events, stay in this process, and any server on the database answers for any run. The
process running a run renews its lease; a run whose process died is taken over (run_recovery.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from langchain_core.messages import BaseMessage, BaseMessageChunk
from langgraph.types import Command, Send, StateSnapshot
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from app.config import Settings
from app.db.base import Database
from app.db.run_records import ACTIVE, RunRecord, RunTable
from app.errors import AppError, ConflictError, NotFoundError, ThreadBusyError, UsageError
from app.server.errors import ForbiddenError, error_body
from app.server.standard.assistants import Assistant, assistant, graph_id_of
from app.server.standard.heads import KnownHeads
from app.server.standard.kept_runtimes import close_kept_runtime, kept_runtime
from app.server.standard.run_workers import RunWorkers
from app.server.standard.wire import (
    LazyJson,
    MessageDumps,
    as_data,
    checkpoint_json,
    jsonable,
    user_message_id,
    user_text,
)
from app.server.users import owners_spec, server_database
from app.service import api
from app.service.context import only_tools
from app.service.events import (
    GRAPH_MODES,
    Event,
    GraphChunk,
    MessageOut,
    NodeFailed,
    NodeUpdate,
    Notice,
    StateValues,
    Token,
    TurnEnd,
    as_json,
)
from app.service.replay import rerun_at_once
from app.service.runtime import Runtime, tidy_heap
from app.service.session import ChatSession, TurnInterrupted
from graphs.run_settings import ApprovalPolicy
from graphs.spec import RunSpec
from tools import side_effect_names

log = logging.getLogger("waypoint.server")
RUN_SPEC_FIELDS = frozenset(RunSpec.__dataclass_fields__)

StreamMode = Literal[
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
]
DEFAULT_MODES: tuple[StreamMode, ...] = ("values",)
# The stream modes the model's tokens feed
TOKEN_MODES = frozenset({"messages", "messages-tuple", "events"})
SUPPORTED_MODES: tuple[str, ...] = get_args(StreamMode)
COMMAND_FIELDS = ("update", "goto", "resume", "graph")
END = "__end__"
# Per live run, for streams that join it late; a longer run keeps its newest ones. A finished
# run leaves memory: joining it later gives its final values from its record.
MAX_KEPT_EVENTS = 1_000
# How often a server looks again at a run that another server runs (join, enqueue): seconds.
POLL_FIRST, POLL_MOST = 0.05, 1.0
# Seconds between two tidyings of the heap after runs (Runs.tidy_when_idle)
TIDY_EVERY = 1.0


class RunRequest(BaseModel):
    """A run as the SDKs send it. Fields the server does not use (webhook, feedback_keys,
    stream_resumable, durability, …) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str
    input: Any = None
    command: dict | None = None
    config: dict | None = None
    context: dict | None = None
    metadata: dict | None = None
    stream_mode: list[StreamMode] = Field(default_factory=lambda: list(DEFAULT_MODES))
    stream_subgraphs: bool = False
    checkpoint_id: str | None = None
    checkpoint: dict | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] | None = None
    if_not_exists: Literal["reject", "create"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] = "delete"  # a stateless run's thread
    interrupt_before: Any = None
    interrupt_after: Any = None
    # Waypoint's own: from an earlier checkpoint, leave the workspace files as they are
    # (`keep_files`) or overwrite those changed outside Waypoint (`force`); a replay re-runs tools
    # with side effects with `confirm` (else only with the approval policy auto).
    keep_files: bool = False
    force: bool = False
    confirm: bool | None = None
    # Waypoint's own: end the custom stream with a `final` event (the turn's status and answer),
    # for the page; LangGraph's server sends no such event, so it is only sent when asked.
    final_event: bool = False

    @field_validator("stream_mode", mode="before")
    @classmethod
    def _modes(cls, value: Any) -> Any:
        modes = [value] if isinstance(value, str) else value or ["values"]
        for mode in modes:
            if mode not in SUPPORTED_MODES:
                raise ValueError(
                    f"stream mode {mode!r} is not supported; use any of {', '.join(SUPPORTED_MODES)}"
                )
        return modes

    @field_validator("interrupt_before", "interrupt_after")
    @classmethod
    def _breakpoints(cls, value: Any) -> Any:
        if value in (None, "*") or (
            isinstance(value, list) and all(isinstance(n, str) for n in value)
        ):
            return value or None
        raise ValueError('give a list of node names, or "*" for every node')

    @field_validator("command")
    @classmethod
    def _command(cls, value: dict | None) -> dict | None:
        """LangGraph's fields; those present but null or empty (as RemoteGraph sends them) are
        left out, and `graph` (which graph the command is for) names this one."""
        if value is None:
            return None
        unknown = set(value) - set(COMMAND_FIELDS)
        if unknown:
            raise ValueError(
                f"unknown command fields {sorted(unknown)}; use {', '.join(COMMAND_FIELDS[:3])}"
            )
        kept = {k: v for k, v in value.items() if k != "graph" and v not in (None, [], {}, "")}
        if not kept:
            raise ValueError('send "resume", "update" or "goto" in the command')
        return kept

    @model_validator(mode="after")
    def _configurable_as_context(self) -> RunRequest:
        """Run settings sent in config.configurable count as context (as langgraph dev copies
        them); the context's own win."""
        configurable = (self.config or {}).get("configurable") or {}
        chosen = {k: v for k, v in configurable.items() if k in RUN_SPEC_FIELDS}
        if chosen:
            self.context = {**chosen, **(self.context or {})}
        return self

    @property
    def graph_options(self) -> dict:
        """LangGraph's run options the graph itself takes (breakpoints)."""
        return {
            name: value
            for name, value in (
                ("interrupt_before", self.interrupt_before),
                ("interrupt_after", self.interrupt_after),
            )
            if value
        }

    def graph_command(self) -> Command:
        """The command as LangGraph's own server maps it (goto names or sends, update pairs)."""
        command = self.command or {}
        goto = command.get("goto")
        goto = goto if isinstance(goto, list) else [goto] if goto is not None else []
        update = command.get("update")
        if isinstance(update, list):
            update = [tuple(pair) for pair in update]
        try:
            return Command(
                update=update,
                goto=[g if isinstance(g, str) else Send(g["node"], g["input"]) for g in goto],
                resume=command.get("resume"),
            )
        except (KeyError, TypeError) as exc:
            raise UsageError(f'command.goto: a node name or {{"node", "input"}} ({exc})') from None

    @property
    def start_checkpoint(self) -> str | None:
        return self.checkpoint_id or (self.checkpoint or {}).get("checkpoint_id")

    def spec(self) -> RunSpec:
        try:
            return RunSpec(**(self.context or {}))
        except ValidationError as exc:
            raise UsageError(f"context: {_problems(exc)}") from None


@dataclass
class Run:
    """One live run of this process and the newest of its events (for streams that join it late)."""

    run_id: str
    thread_id: str
    assistant_id: str
    metadata: dict
    multitask_strategy: str
    kwargs: dict
    created_at: str = field(default_factory=lambda: _now())
    updated_at: str = field(default_factory=lambda: _now())
    status: str = "pending"
    values: Any = None
    error: AppError | None = None
    output_checkpoint: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    rollback: bool = False  # cancelled with action rollback: what it wrote is deleted
    done: threading.Event = field(default_factory=threading.Event)
    # set by the first event after the metadata (output, an error, or the end)
    answered: threading.Event = field(default_factory=threading.Event)
    events: deque[tuple[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_KEPT_EVENTS))
    listeners: list[Callable[[tuple[str, Any]], None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Its messages' JSON, dumped once for all its `values` events and its final values: each is
    # the whole state (a 1,600-message thread dumped ~6 copies per turn)
    dumps: MessageDumps = field(default_factory=MessageDumps, repr=False)

    @classmethod
    def of_record(cls, record: RunRecord) -> Run:
        """The run of a record this process takes over."""
        return cls(
            record.run_id,
            record.thread_id,
            record.assistant_id,
            record.metadata,
            record.multitask_strategy,
            record.kwargs,
            created_at=record.created_at,
            status=record.status,
        )

    def publish(self, name: str, data: Any) -> None:
        with self.lock:
            self.events.append((name, data))
            listeners = list(self.listeners)
        if name != "metadata":
            self.answered.set()
        for listener in listeners:
            listener((name, data))

    def subscribe(self, listener: Callable[[tuple[str, Any]], None]) -> list[tuple[str, Any]]:
        """Add a listener; returns the events so far (given to it by the caller)."""
        with self.lock:
            self.listeners.append(listener)
            return list(self.events)

    def unsubscribe(self, listener: Callable[[tuple[str, Any]], None]) -> None:
        with self.lock, contextlib.suppress(ValueError):
            self.listeners.remove(listener)

    def kept_events(self) -> list[tuple[str, Any]]:
        with self.lock:
            return list(self.events)

    def set_status(self, status: str) -> None:
        self.status, self.updated_at = status, _now()

    def record(self, owner: str | None = None) -> RunRecord:
        return RunRecord(
            self.run_id,
            self.thread_id,
            self.assistant_id,
            self.status,
            self.created_at,
            self.updated_at,
            self.metadata,
            self.kwargs,
            self.multitask_strategy,
            owner=owner,
        )

    def as_json(self) -> dict:
        """The run as the LangGraph Server API shows it (as its record shows it)."""
        return self.record().as_json()


AnyRun = Run | RunRecord


class Runs:
    """The live runs of this process, the records of every run on the database (whichever server
    runs it), and the gate that orders a thread's runs here. `token` names this process as the
    owner of the runs it runs; the keeper (run_recovery.py) renews their leases."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.lease = settings.run_lease_seconds
        self._live: dict[str, Run] = {}
        self._gates: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._records_lock = threading.Lock()
        self._records: tuple[contextlib.ExitStack, Database] | None = None
        self._tidied = 0.0  # when tidy_when_idle last tidied (time.monotonic)
        # Loading a thread's head at a run's start was 3-5 % of serve's CPU at 8 clients
        self.heads = KnownHeads()
        self.workers = RunWorkers(on_retire=close_kept_runtime)

    @contextlib.contextmanager
    def kept_database(self) -> Iterator[Database]:
        """The database on one connection this process keeps open (the run records', and a run's
        check that its thread exists): a SQLite connection opened and closed for each write would,
        as the last one open, fold the WAL into the file at every close (~15 ms). A failure closes
        it; the next use opens it again."""
        with self._records_lock:
            if self._records is None:
                stack = contextlib.ExitStack()
                self._records = (stack, stack.enter_context(server_database(self.settings)))
            database = self._records[1]
        try:
            yield database
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def records(self) -> Iterator[RunTable]:
        """The run records, on the connection `kept_database` keeps."""
        with self.kept_database() as database:
            yield database.runs

    def close(self) -> None:
        """Close the records' connection (at shutdown, or after a failure)."""
        with self._records_lock:
            opened, self._records = self._records, None
        if opened is not None:
            with contextlib.suppress(Exception):  # a connection that failed may fail to close
                opened[0].close()

    # this process's runs --------------------------------------------------------------------------

    def add(self, run: Run) -> None:
        """A new run: its record (leased to this process), then the live run."""
        with self.records() as records:
            records.add(run.record(self.token), self.lease)
        self.adopt(run)

    def adopt(self, run: Run) -> None:
        """Keep a run live here (a new one, or one taken over whose record says so already)."""
        with self._lock:
            self._live[run.run_id] = run
            self._gates.setdefault(run.thread_id, threading.Lock())

    def live(self, run_id: str) -> Run | None:
        with self._lock:
            return self._live.get(run_id)

    def forget(self, run: Run) -> None:
        """A run rolled back, once it ended: gone from the records too (`get` is a 404)."""
        with self._lock:
            self._live.pop(run.run_id, None)
        with self.records() as records:
            records.delete(run.thread_id, run.run_id)

    def running_here(self) -> list[Run]:
        """This process's runs not ended yet, on every thread."""
        with self._lock:
            return [r for r in self._live.values() if not r.done.is_set()]

    def gate(self, thread_id: str) -> threading.Lock:
        with self._lock:
            return self._gates.setdefault(thread_id, threading.Lock())

    def mark_running(self, run: Run) -> None:
        """The run starts its turn; its record notes the thread's head then, the first time (what
        a server that takes the run over compares)."""
        run.set_status("running")
        with self.records() as records:
            records.start(run.run_id, self.token, run.updated_at)

    def finish(self, run: Run) -> None:
        """Store how the run ended; it leaves this process's memory."""
        try:
            error = error_event(run.error) if run.error is not None else None
            with self.records() as records:
                records.finish(
                    run.run_id,
                    self.token,
                    run.updated_at,
                    status=run.status,
                    error=error,
                    output_checkpoint=run.output_checkpoint,
                )
        finally:
            with self._lock:
                self._live.pop(run.run_id, None)
                if not any(r.thread_id == run.thread_id for r in self._live.values()):
                    self._gates.pop(run.thread_id, None)

    def tidy_when_idle(self) -> None:
        """After a run: with no other run here, and at most once every TIDY_EVERY seconds, free
        what the runs left behind (`tidy_heap`, after the client has its answer)."""
        now = time.monotonic()
        with self._lock:
            if self._live or now - self._tidied < TIDY_EVERY:
                return
            self._tidied = now
        tidy_heap()

    def release(self, run: Run) -> None:
        """Give a taken-over run back for a later try (a lease from now); it leaves memory."""
        with self.records() as records:
            records.release(run.run_id, self.token, self.lease)
        with self._lock:
            self._live.pop(run.run_id, None)
        run.done.set()
        run.publish(END, None)

    def stop_live(self, run_id: str) -> None:
        """A client asked (through any server) to cancel this run."""
        run = self.live(run_id)
        if run is not None and not run.stop.is_set():
            log.warning("run %s is cancelled (asked through another server)", run_id)
            run.stop.set()

    def wait_for_earlier(self, run: Run) -> None:
        """Enqueue on every server: wait until the thread's runs made before this one have ended,
        here (their end is awaited) or on another server (their record is looked at again, with
        a growing pause). Runs wait only for earlier ones, so no two wait for each other."""
        delay = POLL_FIRST
        mine = run.record(self.token)
        while not run.stop.is_set():
            with self.records() as records:
                earlier = records.active(run.thread_id, before=mine)
            if not earlier:
                return
            here = self.live(earlier[0].run_id)
            if here is not None:
                here.done.wait(POLL_MOST)
            else:
                run.stop.wait(delay)
                delay = min(delay * 2, POLL_MOST)

    def wait_all(self, timeout: float) -> None:
        """At shutdown: let running turns finish their step and close (they hold thread locks)."""
        with self._lock:
            running = list(self._live.values())
        for run in running:
            run.done.wait(timeout)

    # every server's runs ---------------------------------------------------------------------------

    def get(self, thread_id: str, run_id: str) -> AnyRun:
        """The run, live here or from its record; NotFoundError if there is none."""
        run = self.live(run_id)
        if run is not None and run.thread_id == thread_id:
            return run
        with self.records() as records:
            record = records.get(thread_id, run_id)
        if record is None:
            raise NotFoundError(f"run {run_id} of thread {thread_id} does not exist")
        return record

    def of_thread(
        self, thread_id: str, *, limit: int = 10, offset: int = 0, status: str | None = None
    ) -> list[RunRecord]:
        """The thread's runs on every server, newest first."""
        with self.records() as records:
            return records.of_thread(thread_id, limit=limit, offset=offset, status=status)

    def active(self, thread_id: str, records: RunTable | None = None) -> list[AnyRun]:
        """The thread's pending or running runs, here or on a live server, oldest first."""
        if records is None:
            with self.records() as table:
                return self.active(thread_id, table)
        with self._lock:
            here = [r for r in self._live.values() if r.thread_id == thread_id]
        mine = {r.run_id for r in here}
        # A run here whose outcome is decided no longer counts, though its record is not yet
        # stored: its worker only reads the final values and writes them.
        deciding = [r for r in here if r.status in ACTIVE and not r.done.is_set()]
        elsewhere = [r for r in records.active(thread_id) if r.run_id not in mine]
        return sorted([*deciding, *elsewhere], key=lambda r: (r.created_at, r.run_id))

    def cancel(self, run: AnyRun, wait: bool = False) -> None:
        """Stop the run after its step: here at once; on another server when it next renews its
        lease (a third of the lease at most)."""
        if isinstance(run, Run):
            run.stop.set()
            if wait:
                run.done.wait()
            return
        with self.records() as records:
            records.request_cancel(run.thread_id, run.run_id)

    def delete(self, thread_id: str, run_id: str) -> None:
        run = self.get(thread_id, run_id)
        if isinstance(run, Run) or run.active:
            raise UsageError(f"run {run_id} is still running; cancel it first")
        with self.records() as records:
            records.delete(thread_id, run_id)

    def forget_thread(self, thread_id: str) -> None:
        """The thread was deleted: its runs' records go (deleting the thread removes them too)."""
        self.heads.forget(thread_id)
        with self.records() as records:
            records.forget_thread(thread_id)


def stop_run(runs: Runs, run: AnyRun, action: str) -> None:
    """Cancel a run after its current step; with action rollback (a run of this process), what it
    wrote goes too, and so does the run itself once it has ended (as in LangGraph, `get` no
    longer finds it)."""
    if isinstance(run, Run) and not run.done.is_set() and action == "rollback":
        run.rollback = True

        def forget_once_ended() -> None:
            run.done.wait()
            runs.forget(run)

        threading.Thread(target=forget_once_ended, daemon=True).start()
    runs.cancel(run)


def start_run(settings: Settings, runs: Runs, thread_id: str, request: RunRequest) -> Run:
    """Check the request, make the run and start its worker. Problems a client can fix (a bad
    context, a missing thread, a busy one with `reject`) are raised here, before anything runs."""
    run, work = _made_run(settings, runs, thread_id, request)
    runs.workers.start(work, name=_worker_name(run))
    return run


async def started_run(settings: Settings, runs: Runs, thread_id: str, request: RunRequest) -> Run:
    """`start_run` for the event loop: the run is made on the worker thread it then runs on, one
    thread hop less than making it in the loop's executor and starting a worker from there."""
    loop = asyncio.get_running_loop()
    made: asyncio.Future[Run] = loop.create_future()

    def make_then_work() -> None:
        try:
            run, work = _made_run(settings, runs, thread_id, request)
        except BaseException as exc:  # the request's error (a 4xx), raised in the loop
            _resolve_soon(loop, made, exc)
            return
        _resolve_soon(loop, made, run)
        threading.current_thread().name = _worker_name(run)
        work()

    runs.workers.start(make_then_work, name="run-new")
    return await made


def _resolve_soon(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Run], outcome: Run | BaseException
) -> None:
    def resolve() -> None:
        if future.done():  # the client went away meanwhile
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
        loop.call_soon_threadsafe(resolve)


def _worker_name(run: Run) -> str:
    return f"run-{run.run_id[:8]}"


def _made_run(
    settings: Settings, runs: Runs, thread_id: str, request: RunRequest
) -> tuple[Run, Callable[[], None]]:
    """The checked request's run, stored, and the work that runs it (on a worker thread)."""
    found = assistant(request.assistant_id, settings)
    if found.context:  # a client's own assistant: its context, under the run's own
        request.context = {**found.context, **(request.context or {})}
    spec = request.spec()
    if request.input is not None:  # a bad input is a 400 now, not an error event later
        user_text(request.input)
        user_message_id(request.input)
    if request.command is not None:
        request.graph_command()
    _nodes_must_exist(found, request)
    policy = approval_policy(settings, spec)
    _thread_must_exist(settings, runs, thread_id, request.if_not_exists)
    strategy = request.multitask_strategy or "enqueue"
    active = runs.active(thread_id) if strategy != "enqueue" else []
    if active and strategy == "reject":
        raise ConflictError(
            f"thread {thread_id} is running run {active[0].run_id}; wait for it, or send "
            '"multitask_strategy": "enqueue" or "interrupt"'
        )
    for earlier in active:  # interrupt, rollback: they stop after their step; this run waits
        stop_run(runs, earlier, strategy)
    run = Run(
        str(uuid.uuid4()),
        thread_id,
        found.assistant_id,
        request.metadata or {},
        strategy,
        request.model_dump(exclude_none=True, include=STORED_KWARGS),
    )
    runs.add(run)
    return run, lambda: _work(settings, runs, run, request, spec, policy, found.strategy)


# What a run's record keeps of its request: what the client is shown as the run's `kwargs`, and
# what a server that takes the run over needs to run it again.
STORED_KWARGS = {
    "input",
    "command",
    "context",
    "config",
    "stream_mode",
    "stream_subgraphs",
    "checkpoint_id",
    "checkpoint",
    "keep_files",
    "force",
    "confirm",
}


# Carries on a run taken over from a server that died, in its worker, with the run's runtime,
# session and sink, and what runs the request from the start (run_recovery.carry_on).
Takeover = Callable[[Runtime, ChatSession, "StandardSink", Callable[[], None]], None]


def _start_worker(
    settings: Settings,
    runs: Runs,
    run: Run,
    request: RunRequest,
    spec: RunSpec,
    policy: ApprovalPolicy,
    strategy: str,
    takeover: Takeover | None = None,
) -> None:
    runs.workers.start(
        lambda: _work(settings, runs, run, request, spec, policy, strategy, takeover),
        name=_worker_name(run),
    )


def _nodes_must_exist(found: Assistant, request: RunRequest) -> None:
    """Breakpoints and a command's goto name nodes of the graph: a typo is a 400, not a run that
    fails or never pauses."""
    goto = (request.command or {}).get("goto") or []
    named = [
        g if isinstance(g, str) else g["node"] for g in (goto if isinstance(goto, list) else [goto])
    ]
    for breakpoints in (request.interrupt_before, request.interrupt_after):
        if isinstance(breakpoints, list):
            named += breakpoints
    if not named:
        return
    nodes = set(found.graph().nodes) - {"__start__"}
    unknown = sorted(set(named) - nodes)
    if unknown:
        raise UsageError(
            f"{found.graph_id} has no node {', '.join(unknown)}; "
            f"its nodes are: {', '.join(sorted(nodes))}"
        )


def approval_policy(settings: Settings, spec: RunSpec) -> ApprovalPolicy:
    """The run's approval policy: the context's, else the server's (APP_APPROVE), else ask (the
    run pauses with an interrupt). Auto-approving needs a server started with --approve auto."""
    policy = settings.with_run(spec).approval or "ask"
    if policy == "auto" and settings.approval != "auto":
        raise ForbiddenError(
            "this server does not auto-approve risky tool calls; start it with --approve auto "
            "(or APP_APPROVE=auto), or use approval ask and answer the interrupts"
        )
    return policy


def _thread_must_exist(settings: Settings, runs: Runs, thread_id: str, if_not_exists: str) -> None:
    """Checked on the connection the server keeps (opening one was ~0.2 ms of CPU per run); a
    thread made here is written on a connection of its own."""
    with runs.kept_database() as database:
        if database.thread_exists(thread_id) or thread_id in database.thread_infos():
            return
    if if_not_exists == "create":
        with server_database(settings) as database:
            api.create_thread(database, thread_id, if_exists="do_nothing")
        return
    raise NotFoundError(
        f"thread {thread_id} does not exist; create it with POST /threads, "
        'or send "if_not_exists": "create"'
    )


def _work(
    settings: Settings,
    runs: Runs,
    run: Run,
    request: RunRequest,
    spec: RunSpec,
    policy: ApprovalPolicy,
    strategy: str,
    takeover: Takeover | None = None,
) -> None:
    """Run it (or carry on a run taken over from a server that died): its status, events and end
    go to its record and its listeners."""
    gate = runs.gate(run.thread_id)
    final: tuple[Any, str | None] | None = None
    run.publish("metadata", {"run_id": run.run_id, "attempt": 1 if takeover is None else 2})
    try:
        runs.wait_for_earlier(run)
        with gate:
            if run.stop.is_set():
                raise TurnInterrupted("the run was cancelled before it started")
            runs.mark_running(run)
            with _runtime(settings, owners_spec(settings, spec, run.thread_id), policy) as runtime:
                session = runtime.session(run.thread_id, _strategy_of(request, strategy))
                session.stop = run.stop
                _assume_known_head(runs.heads, session, run)
                sink = StandardSink(
                    run, request.stream_mode, request.stream_subgraphs, request.final_event
                )
                sink.start(request.input)
                client_session = _for_client(session, run, request, strategy)

                def from_the_start() -> None:
                    _dispatch(runtime, client_session, sink, request, settings)

                with _undone_if_rolled_back(run, runtime):
                    if takeover is None:
                        from_the_start()
                    else:
                        takeover(runtime, client_session, sink, from_the_start)
                final = _head_values(session, run.dumps, runs.heads)
        run.set_status("success")
    except TurnInterrupted:
        run.set_status("interrupted")
        if "custom" in request.stream_mode:
            notice = "the run was cancelled; the thread was closed after the step in progress"
            run.publish("custom", {"type": "notice", "text": notice})
    except ThreadBusyError as exc:
        if takeover is None:
            _fail(run, exc)
        else:  # the dead server's lock is not released yet: the run is taken over again later
            runs.release(run)
            return
    except AppError as exc:
        _fail(run, exc)
    except Exception as exc:  # a bug: logged with its traceback, reported without it
        log.exception("run %s on thread %s failed", run.run_id, run.thread_id)
        _fail(run, AppError(f"internal error: {type(exc).__name__}; see the server log"))
    _end(settings, runs, run, final)


def _end(
    settings: Settings, runs: Runs, run: Run, final: tuple[Any, str | None] | None = None
) -> None:
    """The run ends with `final` (its values and head checkpoint) when it ran to its end, else
    with what it left on the thread, read back."""
    if final is None:
        final = _final_values(settings, run.thread_id, run.dumps)
    run.values, run.output_checkpoint = final
    try:
        runs.finish(run)
    except AppError as exc:  # the database went away: its lease runs out, another server looks
        log.error("run %s: its record could not be stored: %s", run.run_id, exc)
    run.done.set()
    run.publish(END, None)
    runs.tidy_when_idle()


def _head_values(
    session: ChatSession, dumps: MessageDumps, heads: KnownHeads
) -> tuple[Any, str | None] | None:
    """The values of a run that ran to its end, from the head its session holds: the state its
    last streamed checkpoint carried, trusted only while that checkpoint is still the thread's
    head (one read of the head's id; a turn's outcome written after the stream moves it, and the
    head is loaded again). Read while the run holds the thread: no other run moves it meanwhile.
    Saves rebuilding the head from the stored message writes (~5 % of serve's CPU). The head is
    kept for the thread's next run here."""
    try:
        head = session.head.load()
    except AppError:
        return None  # read back at the run's end, as for a run that failed
    values = jsonable(head.values, dumps)
    heads.keep(session.thread_id, session.strategy.name, head, dumps)
    return values, head.config["configurable"].get("checkpoint_id")


def _assume_known_head(heads: KnownHeads, session: ChatSession, run: Run) -> None:
    """Start from the head the thread's last run here left (checked before it is used), and with
    its messages' JSON: the run's events dump only the messages that are new to it (dumping the
    whole conversation again at every run was ~3 % of serve's CPU)."""
    known = heads.take(session.thread_id, session.strategy.name)
    if known is not None:
        session.head.assume(known.head)
        run.dumps = known.dumps


def _final_values(
    settings: Settings, thread_id: str, dumps: MessageDumps
) -> tuple[Any, str | None]:
    """The thread's values after the run (what `wait` and `join` answer) and its head checkpoint;
    the messages its events dumped already are not dumped again."""
    try:
        with server_database(settings) as database:
            head = api.head_state(database, thread_id)
    except AppError:
        return None, None
    if head is None:
        return {}, None
    return jsonable(head.values, dumps), head.config["configurable"].get("checkpoint_id")


def record_values(settings: Settings, record: RunRecord) -> Any:
    """The thread's values as the run (finished, from its record) left them."""
    if record.output_checkpoint is None:
        return None
    with server_database(settings) as database:
        head = api.head_state(database, record.thread_id, record.output_checkpoint)
    return jsonable(head.values) if head is not None else {}


def _fail(run: Run, error: AppError) -> None:
    run.error = error
    run.set_status("error")
    run.publish("error", {"error": type(error).__name__, "message": str(error)})


def _strategy_of(request: RunRequest, strategy: str) -> str | None:
    """The assistant's strategy for a new turn; a resumption or replay continues the thread's."""
    return strategy if request.input is not None else None


@contextlib.contextmanager
def _runtime(settings: Settings, spec: RunSpec, policy: ApprovalPolicy) -> Iterator[Runtime]:
    """The server's runtime with what the run's context chose (the rest is the server's), kept by
    the worker thread for its next run with the same settings."""
    with kept_runtime(settings.with_run(spec), policy) as runtime:
        if spec.tools is None:
            yield runtime
            return
        context = only_tools(runtime.context, spec.tools)
        yield Runtime(runtime.settings, runtime.database, runtime.memory, runtime.user, context)


def _dispatch(
    runtime: Runtime,
    session: ChatSession,
    sink: StandardSink,
    request: RunRequest,
    settings: Settings,
) -> None:
    if request.command is not None:
        _command(session, sink, request)
        return
    checkpoint = request.start_checkpoint
    workspace = None if request.keep_files else settings.workspace
    if request.input is None and checkpoint is None:
        _continue(session, sink)
        return
    if request.input is None:
        _replay(runtime, session, sink, request, workspace)
        return
    if checkpoint is not None:  # new input from an earlier checkpoint: a branch from there
        api.rollback(
            runtime.database,
            session.thread_id,
            checkpoint=checkpoint,
            workspace=workspace,
            force=request.force,
        )
    text, message_id = user_text(request.input), user_message_id(request.input)
    session.run_turn(text, sink, message_id=message_id)


def _for_client(session: ChatSession, run: Run, request: RunRequest, strategy: str) -> ChatSession:
    """The session with the run's ids in its checkpoints' (and streamed messages') metadata, as
    LangGraph's server writes them, and the client's breakpoints."""
    session.run_metadata = {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "graph_id": graph_id_of(strategy),
        "assistant_id": run.assistant_id,
    }
    session.graph_options = request.graph_options
    return session


@contextlib.contextmanager
def _undone_if_rolled_back(run: Run, runtime: Runtime) -> Iterator[None]:
    """A run cancelled with action rollback leaves nothing: its checkpoints are deleted before
    the thread's next run may start (the caller holds the thread's gate)."""
    try:
        yield
    except TurnInterrupted:
        if run.rollback:
            api.undo_run(runtime.database, run.thread_id, run.run_id)
        raise


def _command(session: ChatSession, sink: StandardSink, request: RunRequest) -> None:
    """A resume answers the paused approval; goto / update steer the graph (LangGraph's
    Command), resuming as well when they come with a resume value."""
    command = request.command or {}
    if set(command) == {"resume"}:
        session.resume_with(command["resume"], sink)
        return
    session.steer(request.graph_command(), sink)


def _continue(session: ChatSession, sink: StandardSink) -> None:
    """No input: go on from the head (past a breakpoint), as LangGraph runs a None input."""
    if session.head.load().config["configurable"].get("checkpoint_id") is None:
        raise UsageError(
            f'thread {session.thread_id} has no turns yet; send "input" (or a "command")'
        )
    session.resume(sink)


def _replay(
    runtime: Runtime,
    session: ChatSession,
    sink: StandardSink,
    request: RunRequest,
    workspace: Path | None,
) -> None:
    """Re-run from an earlier checkpoint on a new branch. Without consent (`confirm`, or the
    policy auto) a replay that would re-run a tool with side effects at once is refused before
    anything changes, and one that meets such a call later stops there and says why."""
    allowed = request.confirm if request.confirm is not None else session.context.approval == "auto"
    start = api.prepare_replay(
        runtime.database,
        session.thread_id,
        request.start_checkpoint or "",
        workspace=workspace,
        force=request.force,
        check=None if allowed else _refuse_side_effects(session),
    )
    for line in start.workspace.lines():
        sink.emit(Notice(f"workspace: {line}"))

    def approve(calls: list) -> bool:
        if not allowed:
            names = ", ".join(c["name"] for c in calls)
            sink.emit(Notice(f'{names} not re-run: send "confirm": true to allow it'))
        return allowed

    session.replay(start.row.checkpoint_id, sink, approve, start.spared)


def _refuse_side_effects(session: ChatSession) -> Callable[[StateSnapshot, list], None]:
    def check(start: StateSnapshot, _ahead: list) -> None:
        risky = rerun_at_once(session.strategy, start, side_effect_names(session.context.tools))
        if risky:
            raise UsageError(
                f"the replay would re-run tools with side effects ({', '.join(risky)}) at "
                'once; send "confirm": true to allow it'
            )

    return check


class StandardSink:
    """A run's events in LangGraph's stream modes, published on the run as LangGraph's server
    sends them: `messages-tuple` as (message, metadata) pairs, `messages` as accumulated
    `messages/partial` / `messages/complete` with their `messages/metadata` first, LangGraph's own
    `debug`, `tasks` and `checkpoints` passed through, and `events` made from the same stream."""

    wants_values = True

    def __init__(
        self, run: Run, modes: Iterable[str], subgraphs: bool, final_event: bool = False
    ) -> None:
        self.run, self.modes, self.subgraphs = run, set(modes), subgraphs
        self.final_event = final_event
        self.graph_modes = self.modes & GRAPH_MODES
        # The model's tokens only for a client that reads them: streaming them to nobody was ~10 %
        # of serve's CPU. A run stopped mid-answer then keeps no partial answer (nobody saw one).
        self.wants_tokens = bool(self.modes & TOKEN_MODES)
        self._partial: list[str] = []
        self._messages: dict[str, BaseMessage] = {}  # for `messages`: each message so far, by id
        self._values: Any = None  # the last state, the `events` run's output

    def partial_answer(self) -> str:
        return "".join(self._partial)

    def start(self, run_input: Any) -> None:
        """`events` mode: the run's start, with its input."""
        if "events" in self.modes:
            self._publish_event("on_chain_start", "LangGraph", {"input": jsonable(run_input)})

    def emit(self, event: Event) -> None:
        if isinstance(event, Token) and event.text:
            self._partial.append(event.text)
        if isinstance(event, StateValues) and not event.namespace:
            self._values = event.values
        if "events" in self.modes:
            self._event(event)
        if isinstance(event, Token | MessageOut) and "messages" in self.modes:
            self._whole_message(event)
        if isinstance(event, TurnEnd) and not self.final_event:
            return  # Waypoint's own summary of the turn: LangGraph's server sends no such event
        if isinstance(event, NodeFailed):
            log.error("internal error in node %s:\n%s", event.node, event.traceback)
        if mode_name(self._mode(event)) not in self.modes:
            return  # not turned into JSON: a values event is the whole state
        mode, data, namespace = self._wire(event)
        if namespace and not self.subgraphs:
            if mode != "messages":
                return
            namespace = ()  # LangGraph streams a subgraph's messages without subgraphs too
        self.run.publish("|".join([mode, *namespace]) if namespace else mode, data)

    @staticmethod
    def _mode(event: Event) -> str:
        """The stream mode `event` goes out in (before it is turned into JSON)."""
        if isinstance(event, Token | MessageOut):
            return "messages"
        if isinstance(event, StateValues):
            return "values"
        if isinstance(event, NodeUpdate):
            return "updates"
        if isinstance(event, GraphChunk):
            return event.mode
        return "custom"

    def _wire(self, event: Event) -> tuple[str, Any, tuple[str, ...]]:
        if isinstance(event, Token):
            return "messages", [jsonable(event.chunk), jsonable(event.metadata)], event.namespace
        if isinstance(event, MessageOut):
            return "messages", [jsonable(event.message), jsonable(event.metadata)], event.namespace
        if isinstance(event, StateValues):
            return "values", LazyJson(event.values, self.run.dumps), event.namespace
        if isinstance(event, NodeUpdate):
            return "updates", {event.node: jsonable(event.update)}, event.namespace
        if isinstance(event, GraphChunk):
            return event.mode, graph_chunk_json(event), event.namespace
        wire = as_json(event)  # Waypoint's own events: tool cards, retries, notices
        return "custom", {"type": wire.pop("event"), **wire}, ()

    def _whole_message(self, event: Token | MessageOut) -> None:
        """`messages` mode: the message so far (chunks added up), its metadata once first."""
        message = event.chunk if isinstance(event, Token) else event.message
        if message is None:
            return
        key = message.id or ""
        if key in self._messages and isinstance(event, Token):
            self._messages[key] = _added(self._messages[key], message)
        else:
            if key not in self._messages:
                self.run.publish("messages/metadata", {key: {"metadata": jsonable(event.metadata)}})
            self._messages[key] = message
        kind = "messages/partial" if isinstance(event, Token) else "messages/complete"
        self.run.publish(kind, [jsonable(self._messages[key])])

    def _event(self, event: Event) -> None:
        """`events` mode: the astream_events (v2) records a client reads most, made from the
        run's stream: the run's start (see `start`), each model token, each node's update, and
        the run's end."""
        if isinstance(event, Token) and event.chunk is not None:
            self._publish_event(
                "on_chat_model_stream",
                event.node or "model",
                {"chunk": jsonable(event.chunk)},
                jsonable(event.metadata),
            )
        elif isinstance(event, NodeUpdate) and not event.namespace:
            chunk = {event.node: jsonable(event.update)}
            self._publish_event("on_chain_stream", "LangGraph", {"chunk": chunk})
        elif isinstance(event, TurnEnd):
            self._publish_event("on_chain_end", "LangGraph", {"output": jsonable(self._values)})

    def _publish_event(
        self, kind: str, name: str, data: dict, metadata: dict | None = None
    ) -> None:
        run_id = self.run.run_id
        record = {
            "event": kind,
            "name": name,
            "run_id": run_id,
            "data": data,
            "metadata": metadata or {},
            "tags": [],
            "parent_ids": [run_id] if kind == "on_chat_model_stream" else [],
        }
        self.run.publish("events", record)


def graph_chunk_json(chunk: GraphChunk) -> Any:
    """A LangGraph stream item as its server sends it: a `debug` checkpoint also names its
    checkpoint and parent in the API's form."""
    payload = chunk.payload
    if chunk.mode == "debug" and isinstance(payload, dict) and payload.get("type") == "checkpoint":
        inner = payload.get("payload") or {}
        payload = {
            **payload,
            "payload": {
                **inner,
                "checkpoint": checkpoint_json(inner.get("config")),
                "parent_checkpoint": checkpoint_json(inner.get("parent_config")),
            },
        }
    return jsonable(payload)


def mode_name(event: str) -> str:
    return "messages-tuple" if event == "messages" else event


async def stream_events(run: Run, *, cancel_on_disconnect: bool) -> AsyncIterator[tuple[str, Any]]:
    """The run's events from the first one, live, until it ends; a client that goes away only
    detaches (or cancels the run, with on_disconnect=cancel)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def listen(item: tuple[str, Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening
            loop.call_soon_threadsafe(queue.put_nowait, item)

    for item in run.subscribe(listen):
        queue.put_nowait(item)
    try:
        while True:
            name, data = await queue.get()
            if name == END:
                return
            yield name, as_data(data)
    finally:
        run.unsubscribe(listen)
        if cancel_on_disconnect and not run.done.is_set():
            run.stop.set()


async def until_set(run: Run, flag: threading.Event) -> None:
    """Until `flag` of the run (`done`, `answered`) is set, holding no thread meanwhile: a thread
    blocked per waiting client came from the event loop's few (min(32, cores + 4): 6 on 2 cores),
    so 8 waiting clients queued the next runs' start behind them. Each flag is set before an event
    is published (`answered` by it, `done` before END): the run's listener sees it set."""
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    def listen(_item: tuple[str, Any]) -> None:
        if flag.is_set():
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                loop.call_soon_threadsafe(wake)

    run.subscribe(listen)
    try:
        if not flag.is_set():
            await woken
    finally:
        run.unsubscribe(listen)


async def first_problem(run: Run) -> AppError | None:
    """Wait until the run has produced something besides its metadata (or ended); the error it
    ended with before producing anything, so a route can answer it as a plain HTTP error."""
    await until_set(run, run.answered)
    has_output = any(name not in ("metadata", "error", END) for name, _ in run.kept_events())
    return run.error if run.error is not None and not has_output else None


def error_event(error: AppError) -> dict:
    return {"error": type(error).__name__, "message": error_body(error)["detail"]}


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {str(e['msg']).removeprefix('Value error, ')}"
        for e in exc.errors()
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _added(so_far: BaseMessage, chunk: BaseMessage) -> BaseMessage:
    """A streamed message so far with its next chunk (chunks add up; a whole message is replaced:
    a message plus a chunk would make a prompt template)."""
    if isinstance(so_far, BaseMessageChunk) and isinstance(chunk, BaseMessageChunk):
        return so_far + chunk
    return chunk
