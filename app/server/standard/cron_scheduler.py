"""The cron scheduler of a `serve` process: started and stopped with the app (its lifespan), it fires
each due cron (app/server/standard/crons.py) exactly once, whatever the number of servers on the
database, by claiming the firing with one UPDATE of next_run_date before starting the run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from croniter import croniter
from fastapi import FastAPI
from pydantic import ValidationError

from app.config import Settings
from app.db.base import Database
from app.db.crons import CronRecord
from app.errors import AppError
from app.server.standard.assistants import assistant
from app.server.standard.runs import Run, RunRequest, Runs, start_run
from app.server.users import OWNER, server_database
from app.service import api
from tools import clock

log = logging.getLogger("waypoint.server.crons")

POLL_SECONDS = 1.0  # how late a cron may fire (LangGraph's scheduler looks every 5 s)


def instant(moment: datetime) -> str:
    """A moment as stored: UTC, whole seconds, so that text order is time order."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def next_run(schedule: str, after: datetime, timezone: str | None) -> str:
    """The schedule's first time strictly after `after`, read in `timezone` (default UTC)."""
    local = after.astimezone(ZoneInfo(timezone) if timezone else UTC)
    return instant(croniter(schedule, local).get_next(datetime))


class CronScheduler:
    """Fires due crons while the server runs: one look at start (what fell due while no server
    ran), then one every POLL_SECONDS, on the application's clock (APP_NOW pins it)."""

    def __init__(self, settings: Settings, runs: Runs, poll_seconds: float = POLL_SECONDS) -> None:
        self.settings, self.runs, self.poll_seconds = settings, runs, poll_seconds
        self._stop = threading.Event()
        self._problem: str | None = None  # the last failure logged
        self._thread = threading.Thread(target=self._loop, name="cron-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.look()

    def look(self) -> list[Run]:
        """Fire every cron due now that this process claims. A failure is logged once (not every
        second) and never raised: the scheduler outlives a database that is away for a while."""
        try:
            fired = self.tick(clock.now())
        except AppError as exc:  # the database is locked, unreachable, damaged…
            self._report(f"the cron scheduler cannot read the crons: {exc}")
            return []
        except Exception:  # a bug: its traceback, once
            if self._report("the cron scheduler failed", quiet=True):
                log.exception("the cron scheduler failed")
            return []
        self._problem = None
        return fired

    def _report(self, problem: str, *, quiet: bool = False) -> bool:
        """Log a problem unless it is the one already logged; whether it is new."""
        new = problem != self._problem
        if new and not quiet:
            log.error("%s", problem)
        self._problem = problem
        return new

    def tick(self, now: datetime) -> list[Run]:
        with server_database(self.settings) as database:
            claimed = [c for c in database.due_crons(instant(now)) if _claim(database, c, now)]
        return [run for cron in claimed if (run := fire(self.settings, self.runs, cron))]


def _claim(database: Database, cron: CronRecord, now: datetime) -> bool:
    """Whether this process fires the cron's due run (its next run moved past `now`). A stored
    schedule that no longer reads (a damaged row) turns the cron off rather than stop the others."""
    try:
        after = next_run(cron.schedule, now, cron.timezone)
    except (ValueError, KeyError) as exc:
        log.error("cron %s was turned off: its schedule cannot be read (%s)", cron.cron_id, exc)
        database.update_cron(cron.cron_id, {"enabled": False, "updated_at": instant(now)})
        return False
    return database.claim_cron(cron.cron_id, cron.next_run_date or "", after)


def fire(settings: Settings, runs: Runs, cron: CronRecord) -> Run | None:
    """Start the cron's run (on a new thread for a cron without one). A run that cannot start
    (its thread was deleted, the thread is busy and the strategy is reject) is logged."""
    metadata = {**cron.metadata, **(cron.payload.get("metadata") or {})}
    thread_id = cron.thread_id
    try:
        request = RunRequest.model_validate({**cron.payload, "metadata": metadata})
        thread_id = thread_id or _new_thread(settings, cron, metadata)
        run = start_run(settings, runs, thread_id, request)
    except (AppError, ValidationError) as exc:
        log.warning("cron %s did not start its run on thread %s: %s", cron.cron_id, thread_id, exc)
        if cron.thread_id is None and thread_id is not None:
            _delete_thread(settings, runs, thread_id)
        return None
    log.info("cron %s started run %s on thread %s", cron.cron_id, run.run_id, thread_id)
    if cron.thread_id is None and cron.on_run_completed != "keep":
        threading.Thread(
            target=_delete_when_done, args=(settings, runs, run), name="cron-cleanup", daemon=True
        ).start()
    return run


def _new_thread(settings: Settings, cron: CronRecord, metadata: dict) -> str:
    """A thread for one firing, with the metadata LangGraph gives it."""
    thread_id = str(uuid.uuid4())
    graph = assistant(cron.assistant_id).graph_id
    with server_database(settings) as database:
        api.create_thread(
            database,
            thread_id,
            metadata={
                "graph_id": graph,
                "assistant_id": cron.assistant_id,
                **metadata,
                **({OWNER: cron.user_id} if cron.user_id else {}),  # its run uses their memory
            },
        )
    return thread_id


def _delete_when_done(settings: Settings, runs: Runs, run: Run) -> None:
    run.done.wait()
    _delete_thread(settings, runs, run.thread_id)


def _delete_thread(settings: Settings, runs: Runs, thread_id: str) -> None:
    try:
        with server_database(settings) as database:
            api.delete_thread(database, thread_id)
    except AppError as exc:
        log.warning("the cron's thread %s was not deleted: %s", thread_id, exc)
    runs.forget_thread(thread_id)


@contextlib.asynccontextmanager
async def scheduler_lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifespan: its cron scheduler runs from start to shutdown."""
    scheduler = CronScheduler(app.state.settings, app.state.runs)
    await asyncio.to_thread(scheduler.look)
    scheduler.start()
    try:
        yield
    finally:
        await asyncio.to_thread(scheduler.stop)
