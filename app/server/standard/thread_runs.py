"""Runs on a thread, as the LangGraph Server API has them (over runs.py): stream, wait, in the
background; list, get, join, join the stream, cancel (one or many) and delete. A run belongs to
its thread: whoever may not see the thread gets a 404 for its runs too."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from app.config import Settings
from app.db.base import Database
from app.errors import NotFoundError, UsageError
from app.server.params import ThreadId
from app.server.standard.run_streams import (
    SSE_RESPONSE,
    ended,
    live_sse,
    outcome,
    record_sse,
    recorded_outcome,
    runs_of,
    streamed_run,
)
from app.server.standard.runs import AnyRun, Run, RunRequest, started_run, stop_run, until_set
from app.server.users import (
    Caller,
    CurrentUser,
    OwnedThreadId,
    ServerSettings,
    claim_thread,
    owned_view,
    server_database,
)

router = APIRouter(tags=["runs"])


class CancelMany(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_id: str | None = None
    run_ids: list[str] | None = Field(None, max_length=1000)
    status: Literal["pending", "running", "all"] | None = None


async def _claimed(settings: Settings, caller: Caller, thread_id: str, body: RunRequest) -> None:
    """A new run's thread must be the caller's (or, with "if_not_exists": "create", be made so)."""
    if not caller.scoped:
        return  # one user sees every thread: nothing to claim (and no thread to take for it)
    await asyncio.to_thread(claim_thread, settings, caller, thread_id, body.if_not_exists)


@router.post("/threads/{thread_id}/runs/stream", responses=SSE_RESPONSE)
async def stream_run(
    request: Request, thread_id: ThreadId, caller: CurrentUser, body: RunRequest
) -> StreamingResponse:
    """A run, streamed as Server-Sent Events in the requested stream modes."""
    await _claimed(request.app.state.settings, caller, thread_id, body)
    return await streamed_run(request, thread_id, body)


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(  # no return hint: FastAPI would take it for the response model
    request: Request, thread_id: ThreadId, caller: CurrentUser, body: RunRequest
):
    """A run, answered with the thread's values when it ends."""
    settings = request.app.state.settings
    await _claimed(settings, caller, thread_id, body)
    run = await started_run(settings, runs_of(request), thread_id, body)
    await until_set(run, run.done)
    return outcome(run)


@router.post("/threads/{thread_id}/runs")
async def create_run(
    request: Request, thread_id: ThreadId, caller: CurrentUser, body: RunRequest
) -> dict:
    """A run in the background: join, get, list or cancel it by id (through any server on
    the same database)."""
    settings = request.app.state.settings
    await _claimed(settings, caller, thread_id, body)
    run = await started_run(settings, runs_of(request), thread_id, body)
    return run.as_json()


@router.get("/threads/{thread_id}/runs")
def list_runs(
    request: Request,
    thread_id: OwnedThreadId,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    offset: Annotated[int, Query(ge=0)] = 0,
    status: str | None = None,
) -> list:
    found = runs_of(request).of_thread(thread_id, limit=limit, offset=offset, status=status)
    return [r.as_json() for r in found]


@router.get("/threads/{thread_id}/runs/{run_id}")
def get_run(request: Request, thread_id: OwnedThreadId, run_id: str) -> dict:
    return runs_of(request).get(thread_id, run_id).as_json()


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(
    request: Request, thread_id: OwnedThreadId, run_id: str
):  # no return hint, as wait_run
    """The thread's values when the run ends (wherever it runs)."""
    run = await ended(runs_of(request), thread_id, run_id)
    if isinstance(run, Run):
        return outcome(run)
    return await asyncio.to_thread(recorded_outcome, request.app.state.settings, run)


@router.get("/threads/{thread_id}/runs/{run_id}/stream", responses=SSE_RESPONSE)
async def join_stream(request: Request, thread_id: OwnedThreadId, run_id: str) -> StreamingResponse:
    """The run's events (those kept) live until it ends; of a run that ended, or that runs on
    another server, its final values when it ends."""
    runs = runs_of(request)
    run = await asyncio.to_thread(runs.get, thread_id, run_id)
    if isinstance(run, Run):
        return live_sse(run, cancel_on_disconnect=False)
    return record_sse(runs, run)


@router.post("/runs/cancel", status_code=204)
def cancel_runs(
    request: Request,
    settings: ServerSettings,
    caller: CurrentUser,
    body: CancelMany,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> Response:
    """Cancel runs by id (of one thread), or every pending / running one (the caller's)."""
    runs = runs_of(request)
    chosen: list[AnyRun]
    if body.status is not None:
        if body.thread_id or body.run_ids:
            raise UsageError('give either "status", or "thread_id" and "run_ids"')
        chosen = [r for r in runs.running_here() if body.status in ("all", r.status)]
        chosen = _callers_runs(settings, caller, chosen)
    elif body.thread_id is not None and body.run_ids:
        _callers_runs(settings, caller, [], thread_id=body.thread_id)
        chosen = [runs.get(body.thread_id, run_id) for run_id in body.run_ids]
    else:
        raise UsageError('give "thread_id" and "run_ids", or a "status"')
    for run in chosen:
        stop_run(runs, run, action)
    return Response(status_code=204)


def _callers_runs(
    settings: Settings, caller: Caller, runs: list[AnyRun], thread_id: str | None = None
) -> list[AnyRun]:
    """Those of `runs` on the caller's threads; a `thread_id` that is not theirs is a 404."""
    if not caller.scoped:
        return runs
    with server_database(settings) as database:
        if thread_id is not None:
            owned_view(database, caller, thread_id)
        mine = {t for t in {r.thread_id for r in runs} if _sees(database, caller, t)}
    return [r for r in runs if r.thread_id in mine]


def _sees(database: Database, caller: Caller, thread_id: str) -> bool:
    try:
        owned_view(database, caller, thread_id)
    except NotFoundError:
        return False
    return True


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202)
async def cancel_run(
    request: Request,
    thread_id: OwnedThreadId,
    run_id: str,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> dict:
    """Stop the run after its current step, as Ctrl-C does in the terminal (a run on another
    server stops when that server next renews its lease); with action rollback, what the run
    wrote is deleted too (the thread is as it was before it)."""
    runs = runs_of(request)
    run = await asyncio.to_thread(runs.get, thread_id, run_id)
    await asyncio.to_thread(stop_run, runs, run, action)
    if wait:
        run = await ended(runs, thread_id, run_id)
    return run.as_json()


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
def delete_run(request: Request, thread_id: OwnedThreadId, run_id: str) -> Response:
    runs_of(request).delete(thread_id, run_id)
    return Response(status_code=204)
