"""Crons, as the LangGraph Server API has them: a run started on a schedule (5-field crontab, in a
time zone, until an end time), on a thread or on a new thread per firing; stored in the database
(app/db/crons.py) and fired by cron_scheduler.py. The routes: create, search, count, get, update,
delete."""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from fastapi import APIRouter, Body, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from app.config import Settings
from app.db.base import Database
from app.db.crons import CronRecord
from app.errors import NotFoundError, UsageError
from app.server.standard.assistants import assistant
from app.server.standard.cron_scheduler import instant, next_run
from app.server.standard.runs import RunRequest, approval_policy
from app.server.standard.wire import user_text
from app.server.users import (
    Caller,
    CurrentUser,
    Db,
    OwnedThreadId,
    ServerSettings,
    server_database,
)
from app.service import api
from tools import clock

# A cron's run takes these fields of its request (a cron's run always starts with new input).
RUN_FIELDS = frozenset(RunRequest.model_fields) - {
    "command",
    "checkpoint",
    "checkpoint_id",
    "if_not_exists",
}
SORT_FIELDS = Literal[
    "cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"
]
SELECT_FIELDS = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "on_run_completed",
    "enabled",
]


def _valid_schedule(schedule: str) -> str:
    five_fields = len(schedule.split()) == 5 or schedule.startswith("@")  # or @hourly, @daily…
    if not five_fields or not croniter.is_valid(schedule):
        raise ValueError(
            f"invalid cron schedule {schedule[:80]!r}: use 5 fields (minute hour day-of-month "
            "month day-of-week), e.g. '*/5 * * * *' for every 5 minutes"
        )
    return schedule


def _valid_timezone(timezone: str) -> str:
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {timezone[:80]!r}: use an IANA name, e.g. 'Europe/Paris'"
        ) from None
    return timezone


Schedule = Annotated[str, AfterValidator(_valid_schedule)]
TimeZone = Annotated[str, AfterValidator(_valid_timezone)]


class CronWhen(BaseModel):
    """When a cron fires. The other fields of the body are its run's (as in POST …/runs)."""

    model_config = ConfigDict(extra="allow")

    schedule: Schedule | None = None
    timezone: TimeZone | None = None
    end_time: datetime | None = None
    enabled: bool | None = None
    on_run_completed: Literal["delete", "keep"] | None = None

    def run_fields(self) -> dict[str, Any]:
        return {k: v for k, v in (self.model_extra or {}).items() if k in RUN_FIELDS}

    def payload(self) -> dict[str, Any]:
        """What LangGraph keeps as the cron's payload: the fields sent (the run's and the
        schedule's)."""
        sent = self.model_fields_set & set(CronWhen.model_fields)
        return self.model_dump(include=sent, exclude_none=True, mode="json") | self.run_fields()


class CronCreate(CronWhen):
    assistant_id: str
    schedule: Schedule


class CronSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    metadata: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: SORT_FIELDS = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[SELECT_FIELDS] | None = None


def cron_json(cron: CronRecord) -> dict[str, Any]:
    """A cron as LangGraph's server answers it."""
    return {
        "cron_id": cron.cron_id,
        "assistant_id": cron.assistant_id,
        "thread_id": cron.thread_id,
        "user_id": cron.user_id,
        "end_time": cron.end_time,
        "schedule": cron.schedule,
        "timezone": cron.timezone,
        "payload": cron.payload,
        "next_run_date": cron.next_run_date,
        "metadata": cron.metadata,
        "on_run_completed": cron.on_run_completed,
        "enabled": cron.enabled,
        "created_at": cron.created_at,
        "updated_at": cron.updated_at,
    }


def checked_run(settings: Settings, payload: dict[str, Any]) -> RunRequest:
    """The cron's run as start_run will get it, refused now (not at each firing) if it would be."""
    try:
        request = RunRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        ) from None
    assistant(request.assistant_id)
    if request.input is None:
        raise UsageError('a cron needs the "input" of its runs')
    user_text(request.input)
    approval_policy(settings, request.spec())
    return request


def new_cron(
    settings: Settings,
    body: CronCreate,
    thread_id: str | None,
    now: datetime,
    caller: Caller | None = None,
) -> CronRecord:
    """Check the cron and store it; its first run is the schedule's first time after `now`. Under
    a users file it is the caller's (their user_id; its runs use their memory)."""
    payload = {**body.payload(), "assistant_id": assistant(body.assistant_id).assistant_id}
    if thread_id is not None:
        with server_database(settings) as database:
            api.thread_view(database, thread_id)  # a missing thread is a 404
    checked_run(settings, payload)
    cron = CronRecord(
        cron_id=str(uuid.uuid4()),
        assistant_id=payload["assistant_id"],
        thread_id=thread_id,
        schedule=body.schedule,
        timezone=body.timezone,
        end_time=instant(body.end_time) if body.end_time else None,
        next_run_date=next_run(body.schedule, now, body.timezone),
        enabled=body.enabled is not False,
        on_run_completed=None if thread_id else (body.on_run_completed or "delete"),
        payload=payload,
        metadata=payload.get("metadata") or {},
        user_id=caller.user if caller is not None and caller.scoped else None,
        created_at=instant(now),
        updated_at=instant(now),
    )
    with server_database(settings) as database:
        database.save_cron(cron)
    return cron


def changed_cron(settings: Settings, cron: CronRecord, patch: CronWhen, now: datetime) -> dict:
    """The columns a PATCH changes: metadata and run fields merge into the stored ones."""
    if not patch.model_fields_set and not patch.model_extra:
        raise UsageError("send at least one field to change")
    changes: dict[str, Any] = {"updated_at": instant(now)}
    for name in ("schedule", "timezone", "enabled", "on_run_completed"):
        if getattr(patch, name) is not None:
            changes[name] = getattr(patch, name)
    if "end_time" in patch.model_fields_set:  # an explicit null clears it
        changes["end_time"] = instant(patch.end_time) if patch.end_time else None
    # A new schedule or time zone moves the next run, and so does enabling a cron or moving its
    # end when its next run is past (the times it missed are not made up all at once).
    missed = (cron.next_run_date or "") < instant(now) and {"enabled", "end_time"} & set(changes)
    if patch.schedule is not None or patch.timezone is not None or missed:
        schedule = changes.get("schedule", cron.schedule)
        changes["next_run_date"] = next_run(schedule, now, changes.get("timezone", cron.timezone))
    metadata = {**cron.metadata, **(patch.run_fields().get("metadata") or {})}
    payload = {**cron.payload, **patch.payload(), "metadata": metadata}
    payload["assistant_id"] = cron.assistant_id
    if "end_time" in changes and changes["end_time"] is None:
        payload.pop("end_time", None)
    if patch.run_fields():
        checked_run(settings, payload)
    return changes | {"payload": payload, "metadata": metadata}


def matching(crons: list[CronRecord], search: CronSearch) -> list[CronRecord]:
    wanted = search.assistant_id
    with contextlib.suppress(NotFoundError):  # a graph id names its assistant
        wanted = assistant(wanted or "").assistant_id
    found = [
        c
        for c in crons
        if wanted in (None, c.assistant_id)
        if search.thread_id in (None, c.thread_id)
        if search.enabled in (None, c.enabled)
        if contains(c.metadata, search.metadata or {})
    ]
    # None sorts first ascending (LangGraph: a missing date is the earliest)
    found.sort(
        key=lambda c: (getattr(c, search.sort_by) is not None, getattr(c, search.sort_by) or "")
    )
    return found[::-1] if search.sort_order == "desc" else found


def contains(value: Any, wanted: Any) -> bool:
    """JSON containment (PostgreSQL's @>), as LangGraph filters metadata."""
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(
            k in value and contains(value[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return isinstance(value, list) and all(any(contains(x, w) for x in value) for w in wanted)
    return value == wanted


router = APIRouter(tags=["crons"])


def owned_cron(database: Database, caller: Caller, cron_id: str) -> CronRecord:
    """The cron if it exists and is the caller's (another user's is "does not exist")."""
    cron = database.cron(cron_id)
    if cron is None or not caller.owns(cron.user_id):
        raise NotFoundError(f"cron {cron_id[:80]} does not exist")
    return cron


def callers_crons(database: Database, caller: Caller) -> list[CronRecord]:
    return [c for c in database.crons() if caller.owns(c.user_id)]


@router.post("/runs/crons")
def create_cron(settings: ServerSettings, caller: CurrentUser, body: CronCreate) -> dict:
    """A cron whose every firing runs on a new thread (deleted after the run unless
    on_run_completed is keep)."""
    return cron_json(new_cron(settings, body, None, clock.now(), caller))


@router.post("/threads/{thread_id}/runs/crons")
def create_thread_cron(
    settings: ServerSettings, caller: CurrentUser, thread_id: OwnedThreadId, body: CronCreate
) -> dict:
    """A cron whose firings run on this thread, one after another (multitask_strategy)."""
    return cron_json(new_cron(settings, body, thread_id, clock.now(), caller))


@router.post("/runs/crons/search")
def search_crons(
    caller: CurrentUser, database: Db, body: Annotated[CronSearch | None, Body()] = None
) -> JSONResponse:
    body = body or CronSearch()
    every = matching(callers_crons(database, caller), body)
    page = [cron_json(c) for c in every[body.offset : body.offset + body.limit]]
    if body.select:
        page = [{k: v for k, v in c.items() if k in body.select} for c in page]
    headers = {"X-Pagination-Total": str(len(every))}
    if body.offset + body.limit < len(every):
        headers["X-Pagination-Next"] = str(body.offset + body.limit)
    return JSONResponse(page, headers=headers)


@router.post("/runs/crons/count")
def count_crons(
    caller: CurrentUser, database: Db, body: Annotated[CronSearch | None, Body()] = None
) -> int:
    return len(matching(callers_crons(database, caller), body or CronSearch()))


@router.get("/runs/crons/{cron_id}")
def get_cron(caller: CurrentUser, database: Db, cron_id: str) -> dict:
    return cron_json(owned_cron(database, caller, cron_id))


@router.patch("/runs/crons/{cron_id}")
def update_cron(
    settings: ServerSettings, caller: CurrentUser, database: Db, cron_id: str, body: CronWhen
) -> dict:
    changes = changed_cron(settings, owned_cron(database, caller, cron_id), body, clock.now())
    database.update_cron(cron_id, changes)
    return cron_json(owned_cron(database, caller, cron_id))


@router.delete("/runs/crons/{cron_id}", status_code=204)
def delete_cron(caller: CurrentUser, database: Db, cron_id: str) -> Response:
    owned_cron(database, caller, cron_id)
    if not database.delete_cron(cron_id):
        raise NotFoundError(f"cron {cron_id[:80]} does not exist")
    return Response(status_code=204)
