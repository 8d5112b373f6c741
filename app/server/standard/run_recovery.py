"""Runs whose server died: the keeper renews this process's leases (and hears cancels sent through
other servers), and takes over runs whose lease ran out, carrying each on from the thread's last
checkpoint, or marking it `error` when that would repeat a side effect (docs/notes/runs.md)."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

from app.db.run_records import RunRecord
from app.errors import AppError
from app.server.errors import ForbiddenError
from app.server.standard.assistants import assistant
from app.server.standard.runs import (
    Run,
    RunRequest,
    Runs,
    StandardSink,
    _fail,
    _start_worker,
    approval_policy,
)
from app.service.events import Notice
from app.service.replay import rerun_at_once
from app.service.runtime import Runtime
from app.service.session import ChatSession
from graphs.shared.messages import dangling_tool_calls
from tools import side_effect_names

log = logging.getLogger("waypoint.server")


class RunLostError(AppError):
    """Recorded for a run whose server stopped mid-run when carrying it on would run a tool with
    side effects again: the step is closed as cancelled instead."""


class Keeper:
    """A daemon thread, from the server's start to its shutdown: every third of the lease, renew
    this process's leases, stop the runs a client cancelled through another server, and take over
    runs whose lease ran out (the first look at once)."""

    def __init__(self, runs: Runs) -> None:
        self.runs = runs
        self._failing = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="run-keeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            self.tick()
            if self._stopping.wait(self.runs.lease / 3):
                return

    def tick(self) -> None:
        runs = self.runs
        # The keeper must outlive a database that is briefly away (locked, restarting): the next
        # tick tries again, and an outage is logged once.
        try:
            with runs.records() as records:
                for run_id in records.renew(runs.token, runs.lease):
                    runs.stop_live(run_id)
                claimed = records.claim_expired(runs.token, runs.lease)
        except AppError as exc:
            if not self._failing:
                log.error("the run keeper cannot use the database (%s); trying again", exc)
            self._failing = True
            return
        except Exception:  # a bug, or a driver error no boundary mapped: with its traceback
            log.exception("the run keeper failed; trying again")
            return
        if self._failing:
            log.warning("the run keeper reaches the database again")
        self._failing = False
        for record in claimed:
            take_over(runs, record)


def take_over(runs: Runs, record: RunRecord) -> None:
    """Carry on a run this process just claimed (its server died), in a worker of its own."""
    if runs.live(record.run_id) is not None:
        return  # this process's own run, whose renewal came late: it runs here still
    log.warning(
        "taking over run %s of thread %s (its server stopped)", record.run_id, record.thread_id
    )
    run = Run.of_record(record)
    runs.adopt(run)
    settings = runs.settings
    try:
        request = RunRequest(assistant_id=record.assistant_id, **record.kwargs)
        found = assistant(request.assistant_id)
        spec = request.spec()
    except (AppError, ValueError) as exc:
        _give_up(runs, run, exc)
        return
    try:
        policy = approval_policy(settings, spec)
    except ForbiddenError:  # auto-approved on its server, not on this one: ask instead
        policy = "ask"
    takeover = functools.partial(carry_on, record)
    _start_worker(settings, runs, run, request, spec, policy, found.strategy, takeover)


def _give_up(runs: Runs, run: Run, exc: Exception) -> None:
    """A record this server cannot run (an assistant it does not have): marked, not left running."""
    _fail(run, RunLostError(f"its server stopped and this one cannot carry it on: {exc}"))
    runs.finish(run)
    run.done.set()


def carry_on(
    record: RunRecord,
    runtime: Runtime,
    session: ChatSession,
    sink: StandardSink,
    from_the_start: Callable[[], None],
) -> None:
    """Carry on a run that was pending or running when its server died: run it from the start if
    it had not changed the thread yet, else resume the thread's unfinished step, unless that would
    run a tool with side effects again (then the step is closed and the run fails)."""
    started = record.status == "running" and record.head_before is not None
    if not started or runtime.database.runs.head_id(record.thread_id) == record.head_before:
        from_the_start()  # nothing of it is in the thread yet
        return
    if session.pending_step() is None:
        return  # its turn had ended (or waits for an approval): only the record was behind
    repeated = _side_effects_left(session)
    if repeated and session.context.approval != "auto":
        session.discard(sink)
        raise RunLostError(
            f"the server running this run stopped while {', '.join(repeated)} ran; to not run it "
            "twice, the step was closed as cancelled: check its effect, then send the message again"
        )
    sink.emit(Notice(f"run {record.run_id} resumed from the thread's last checkpoint"))
    session.resume(sink)


def _side_effects_left(session: ChatSession) -> list[str]:
    """Tools with side effects that resuming the thread's unfinished step would run (again)."""
    state = session.head.load()
    risky = side_effect_names(session.context.tools)
    open_calls = dangling_tool_calls(state.values.get("messages", []))
    names = [c["name"] for c in open_calls if c["name"] in risky]
    names += rerun_at_once(session.strategy, state, risky)
    return sorted(set(names))
