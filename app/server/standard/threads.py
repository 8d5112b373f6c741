"""Threads and their runs, as the LangGraph Server API has them: create (with metadata), get,
search, update, copy, delete; the state at the head or a checkpoint, update_state, history; and the
runs routes (stream, wait, background, join, cancel) over runs.py."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from app.config import Settings
from app.db import open_database
from app.db.base import Database
from app.db.run_records import RunRecord
from app.errors import AppError, ConflictError, NotFoundError, UsageError
from app.server.events import sse
from app.server.params import ThreadId
from app.server.standard.runs import (
    POLL_FIRST,
    POLL_MOST,
    AnyRun,
    Run,
    RunRequest,
    Runs,
    error_event,
    first_problem,
    record_values,
    start_run,
    stop_run,
    stream_events,
)
from app.server.standard.wire import jsonable, state_json, state_values, task_interrupts
from app.service import api
from app.service.api import ThreadView

MAX_BATCH = 100  # stateless runs in one /runs/batch
SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"}
}


class ThreadCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_id: str | None = Field(None, description="1-64 of [A-Za-z0-9._-]; a UUID if omitted")
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: Literal["thread_id", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None


class ThreadPrune(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_ids: list[str] = Field(default_factory=list, max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"


class ThreadPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: dict[str, Any] = Field(default_factory=dict)


class StateUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    values: Any = None
    as_node: str | None = None
    checkpoint: dict | None = None
    checkpoint_id: str | None = None


class HistoryRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    limit: int = Field(10, ge=1, le=1000)
    before: dict | str | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict | None = None


class CancelMany(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_id: str | None = None
    run_ids: list[str] | None = Field(None, max_length=1000)
    status: Literal["pending", "running", "all"] | None = None


class CheckpointRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    checkpoint: dict = Field(default_factory=dict)
    subgraphs: bool = False


def routes() -> APIRouter:
    api_router = APIRouter()

    def settings_of(request: Request) -> Settings:
        return request.app.state.settings

    def runs_of(request: Request) -> Runs:
        return request.app.state.runs

    def thread_json(request: Request, database: Any, view: ThreadView) -> dict:
        head = api.head_state(database, view.thread_id)
        return {
            "thread_id": view.thread_id,
            "created_at": view.created_at,
            "updated_at": view.updated_at,
            "state_updated_at": view.updated_at,
            "metadata": view.metadata,
            "status": _status(runs_of(request), database, view.thread_id, head),
            "config": {},
            "values": jsonable(head.values) if head is not None else None,
            "interrupts": task_interrupts(head),
        }

    @api_router.post("/threads", tags=["threads"])
    def create_thread(
        request: Request, body: Annotated[ThreadCreate | None, Body()] = None
    ) -> dict:
        body = body or ThreadCreate()
        settings = settings_of(request)
        thread_id = body.thread_id or str(uuid.uuid4())
        with open_database(settings.database, settings.busy_timeout) as database:
            view, _ = api.create_thread(
                database, thread_id, metadata=body.metadata, if_exists=body.if_exists
            )
            return thread_json(request, database, view)

    @api_router.post("/threads/search", tags=["threads"])
    def search_threads(
        request: Request, body: Annotated[ThreadSearch | None, Body()] = None
    ) -> list:
        body = body or ThreadSearch()
        settings = settings_of(request)
        page = slice(body.offset, body.offset + body.limit)
        by_state = body.status is not None or body.values is not None
        with open_database(settings.database, settings.busy_timeout) as database:
            views = _matching(api.thread_views(database), body)
            # a thread's state is loaded only for the page, unless a filter needs every one
            found = [
                thread_json(request, database, v) for v in (views if by_state else views[page])
            ]
        return [t for t in found if _selected(t, body)][page] if by_state else found

    @api_router.post("/threads/count", tags=["threads"])
    def count_threads(request: Request, body: Annotated[ThreadSearch | None, Body()] = None) -> int:
        body = (body or ThreadSearch()).model_copy(update={"limit": 1000, "offset": 0})
        return len(search_threads(request, body))

    @api_router.post("/threads/prune", tags=["threads"])
    def prune_threads(request: Request, body: ThreadPrune) -> dict:
        """Delete these threads (those that do not exist are not counted). Keeping only the
        latest state is the CLI's `threads prune --keep-last-turns 1`."""
        if body.strategy != "delete":
            raise UsageError(
                'only "strategy": "delete" is supported; to keep a thread\'s last turn only, run '
                "`python -m app threads prune --keep-last-turns 1`"
            )
        settings, pruned = settings_of(request), 0
        with open_database(settings.database, settings.busy_timeout) as database:
            for thread_id in body.thread_ids:
                if runs_of(request).active(thread_id):
                    raise ConflictError(f"thread {thread_id} is running a run; cancel it first")
                with contextlib.suppress(NotFoundError):
                    api.delete_thread(database, thread_id)
                    pruned += 1
                runs_of(request).forget_thread(thread_id)
        return {"pruned_count": pruned}

    @api_router.get("/threads/{thread_id}", tags=["threads"])
    def get_thread(request: Request, thread_id: ThreadId) -> dict:
        settings = settings_of(request)
        with open_database(settings.database, settings.busy_timeout) as database:
            return thread_json(request, database, api.thread_view(database, thread_id))

    @api_router.patch("/threads/{thread_id}", tags=["threads"])
    def update_thread(request: Request, thread_id: ThreadId, body: ThreadPatch) -> dict:
        settings = settings_of(request)
        with open_database(settings.database, settings.busy_timeout) as database:
            view = api.update_thread_metadata(database, thread_id, body.metadata)
            return thread_json(request, database, view)

    @api_router.delete("/threads/{thread_id}", status_code=204, tags=["threads"])
    def delete_thread(request: Request, thread_id: ThreadId) -> Response:
        settings = settings_of(request)
        with open_database(settings.database, settings.busy_timeout) as database:
            api.delete_thread(database, thread_id)  # its runs' records go with it
        return Response(status_code=204)

    @api_router.post("/threads/{thread_id}/copy", tags=["threads"])
    def copy_thread(request: Request, thread_id: ThreadId) -> dict:
        settings = settings_of(request)
        with open_database(settings.database, settings.busy_timeout) as database:
            view = api.copy_thread(database, thread_id, str(uuid.uuid4()))
            return thread_json(request, database, view)

    @api_router.get("/threads/{thread_id}/state", tags=["state"])
    def get_state(request: Request, thread_id: ThreadId, subgraphs: bool = False) -> dict:
        return _state(settings_of(request), thread_id, None)

    @api_router.get("/threads/{thread_id}/state/{checkpoint_id}", tags=["state"])
    def get_state_at(
        request: Request, thread_id: ThreadId, checkpoint_id: str, subgraphs: bool = False
    ) -> dict:
        return _state(settings_of(request), thread_id, checkpoint_id)

    @api_router.post("/threads/{thread_id}/state/checkpoint", tags=["state"])
    def get_state_at_checkpoint(
        request: Request, thread_id: ThreadId, body: CheckpointRequest
    ) -> dict:
        return _state(settings_of(request), thread_id, body.checkpoint.get("checkpoint_id"))

    @api_router.post("/threads/{thread_id}/state", tags=["state"])
    def update_state(request: Request, thread_id: ThreadId, body: StateUpdate) -> dict:
        """Write values as `as_node` would, on the head or on `checkpoint` (a branch from it)."""
        settings = settings_of(request)
        checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
        with open_database(settings.database, settings.busy_timeout) as database:
            written = api.update_state(
                database,
                thread_id,
                state_values(body.values),
                as_node=body.as_node,
                checkpoint_id=checkpoint_id,
            )
        return {
            "checkpoint": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": written}
        }

    @api_router.get("/threads/{thread_id}/history", tags=["state"])
    def history_get(
        request: Request,
        thread_id: ThreadId,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10,
        before: str | None = None,
    ) -> list:
        return _history(settings_of(request), thread_id, HistoryRequest(limit=limit, before=before))

    @api_router.post("/threads/{thread_id}/history", tags=["state"])
    def history_post(
        request: Request, thread_id: ThreadId, body: Annotated[HistoryRequest | None, Body()] = None
    ) -> list:
        return _history(settings_of(request), thread_id, body or HistoryRequest())

    @api_router.post("/threads/{thread_id}/runs/stream", responses=SSE_RESPONSE, tags=["runs"])
    async def stream_run(
        request: Request, thread_id: ThreadId, body: RunRequest
    ) -> StreamingResponse:
        """A run, streamed as Server-Sent Events in the requested stream modes."""
        return await streamed_run(request, thread_id, body)

    # The routes that answer with a run's outcome (its values, or an error response) have no return
    # hint: FastAPI would take it for their response model.
    @api_router.post("/threads/{thread_id}/runs/wait", tags=["runs"])
    async def wait_run(request: Request, thread_id: ThreadId, body: RunRequest):
        """A run, answered with the thread's values when it ends."""
        run = await asyncio.to_thread(
            start_run, settings_of(request), runs_of(request), thread_id, body
        )
        await asyncio.to_thread(run.done.wait)
        return _outcome(run)

    @api_router.post("/threads/{thread_id}/runs", tags=["runs"])
    async def create_run(request: Request, thread_id: ThreadId, body: RunRequest) -> dict:
        """A run in the background: join, get, list or cancel it by id (through any server on
        the same database)."""
        run = await asyncio.to_thread(
            start_run, settings_of(request), runs_of(request), thread_id, body
        )
        return run.as_json()

    @api_router.get("/threads/{thread_id}/runs", tags=["runs"])
    def list_runs(
        request: Request,
        thread_id: ThreadId,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10,
        offset: Annotated[int, Query(ge=0)] = 0,
        status: str | None = None,
    ) -> list:
        found = runs_of(request).of_thread(thread_id, limit=limit, offset=offset, status=status)
        return [r.as_json() for r in found]

    @api_router.get("/threads/{thread_id}/runs/{run_id}", tags=["runs"])
    def get_run(request: Request, thread_id: ThreadId, run_id: str) -> dict:
        return runs_of(request).get(thread_id, run_id).as_json()

    @api_router.get("/threads/{thread_id}/runs/{run_id}/join", tags=["runs"])
    async def join_run(request: Request, thread_id: ThreadId, run_id: str):
        """The thread's values when the run ends (wherever it runs)."""
        run = await _ended(runs_of(request), thread_id, run_id)
        if isinstance(run, Run):
            return _outcome(run)
        return await asyncio.to_thread(_recorded_outcome, settings_of(request), run)

    @api_router.get(
        "/threads/{thread_id}/runs/{run_id}/stream", responses=SSE_RESPONSE, tags=["runs"]
    )
    async def join_stream(request: Request, thread_id: ThreadId, run_id: str) -> StreamingResponse:
        """The run's events (those kept) live until it ends; of a run that ended, or that runs on
        another server, its final values when it ends."""
        runs = runs_of(request)
        run = await asyncio.to_thread(runs.get, thread_id, run_id)
        if isinstance(run, Run):
            return _sse(run, cancel_on_disconnect=False)
        return _record_sse(runs, run)

    @api_router.get("/threads/{thread_id}/stream", responses=SSE_RESPONSE, tags=["threads"])
    def join_thread_stream(request: Request, thread_id: ThreadId) -> StreamingResponse:
        """The thread's running run's events from its start, live until it ends (none running:
        an empty stream)."""
        settings = settings_of(request)
        with open_database(settings.database, settings.busy_timeout) as database:
            api.thread_view(database, thread_id)  # a missing thread is a 404
        runs = runs_of(request)
        active = runs.active(thread_id)
        if not active:
            return StreamingResponse(iter(()), media_type="text/event-stream")
        if isinstance(active[0], Run):
            return _sse(active[0], cancel_on_disconnect=False)
        return _record_sse(runs, active[0])  # running on another server

    @api_router.post("/runs/stream", responses=SSE_RESPONSE, tags=["stateless runs"])
    async def stream_stateless(request: Request, body: RunRequest) -> StreamingResponse:
        """A run on a new thread of its own, streamed; the thread is deleted when the run ends
        (unless "on_completion": "keep")."""
        run, _ = await start_stateless(request, body)
        return await run_events(run, body)

    @api_router.post("/runs/wait", tags=["stateless runs"])
    async def wait_stateless(request: Request, body: RunRequest):
        """A run on a new thread of its own, answered with its values."""
        run, cleanup = await start_stateless(request, body, awaited=True)
        await asyncio.to_thread(run.done.wait)
        await asyncio.to_thread(cleanup)
        return _outcome(run)

    @api_router.post("/runs", tags=["stateless runs"])
    async def create_stateless(request: Request, body: RunRequest) -> dict:
        """A run on a new thread of its own, in the background."""
        run, _ = await start_stateless(request, body)
        return run.as_json()

    @api_router.post("/runs/batch", tags=["stateless runs"])
    async def create_stateless_batch(
        request: Request, body: Annotated[list[RunRequest], Body(max_length=MAX_BATCH)]
    ) -> list[dict]:
        """Several stateless runs in the background, each on a thread of its own."""
        return [(await start_stateless(request, one))[0].as_json() for one in body]

    @api_router.post("/runs/cancel", status_code=204, tags=["runs"])
    def cancel_runs(
        request: Request,
        body: CancelMany,
        action: Literal["interrupt", "rollback"] = "interrupt",
    ) -> Response:
        """Cancel runs by id (of one thread), or every pending / running one."""
        runs = runs_of(request)
        if body.status is not None:
            if body.thread_id or body.run_ids:
                raise UsageError('give either "status", or "thread_id" and "run_ids"')
            chosen: list[AnyRun] = [
                r for r in runs.running_here() if body.status in ("all", r.status)
            ]
        elif body.thread_id is not None and body.run_ids:
            chosen = [runs.get(body.thread_id, run_id) for run_id in body.run_ids]
        else:
            raise UsageError('give "thread_id" and "run_ids", or a "status"')
        for run in chosen:
            stop_run(runs, run, action)
        return Response(status_code=204)

    @api_router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202, tags=["runs"])
    async def cancel_run(
        request: Request,
        thread_id: ThreadId,
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
            run = await _ended(runs, thread_id, run_id)
        return run.as_json()

    @api_router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204, tags=["runs"])
    def delete_run(request: Request, thread_id: ThreadId, run_id: str) -> Response:
        runs_of(request).delete(thread_id, run_id)
        return Response(status_code=204)

    return api_router


async def start_stateless(
    request: Request, body: RunRequest, *, awaited: bool = False
) -> tuple[Run, Callable[[], None]]:
    """A run on a new thread of its own, and what deletes that thread (nothing with
    "on_completion": "keep"). Unless `awaited` (the caller deletes it after the run), the thread
    is deleted once the run has ended, as LangGraph's server does."""
    settings, runs = request.app.state.settings, request.app.state.runs
    thread_id = str(uuid.uuid4())

    def create() -> None:
        with open_database(settings.database, settings.busy_timeout) as database:
            api.create_thread(database, thread_id, metadata={"stateless": True})

    def delete() -> None:
        with (
            open_database(settings.database, settings.busy_timeout) as database,
            contextlib.suppress(NotFoundError),  # the client deleted it already
        ):
            api.delete_thread(database, thread_id)
        runs.forget_thread(thread_id)

    await asyncio.to_thread(create)
    try:
        run = await asyncio.to_thread(start_run, settings, runs, thread_id, body)
    except Exception:
        await asyncio.to_thread(delete)
        raise
    cleanup = delete if body.on_completion == "delete" else lambda: None
    if not awaited:
        threading.Thread(target=lambda: (run.done.wait(), cleanup()), daemon=True).start()
    return run, cleanup


async def streamed_run(request: Request, thread_id: str, body: RunRequest) -> StreamingResponse:
    """Start a run and answer with its events; a problem before its first event (a busy thread,
    bad input) is a plain HTTP error instead."""
    settings, runs = request.app.state.settings, request.app.state.runs
    run = await asyncio.to_thread(start_run, settings, runs, thread_id, body)
    return await run_events(run, body)


async def run_events(run: Run, body: RunRequest) -> StreamingResponse:
    problem = await first_problem(run)
    if problem is not None:
        raise problem
    return _sse(run, cancel_on_disconnect=body.on_disconnect == "cancel")


def _state(settings: Settings, thread_id: str, checkpoint_id: str | None) -> dict:
    with open_database(settings.database, settings.busy_timeout) as database:
        return state_json(api.head_state(database, thread_id, checkpoint_id))


def _history(settings: Settings, thread_id: str, body: HistoryRequest) -> list:
    before = checkpoint_id_of(body.before)
    with open_database(settings.database, settings.busy_timeout) as database:
        states = api.state_history(
            database, thread_id, limit=body.limit, before=before, metadata=body.metadata
        )
    return [state_json(s) for s in states]


def checkpoint_id_of(ref: dict | str | None) -> str | None:
    """A checkpoint named as LangGraph's clients do: its id, a checkpoint ({"checkpoint_id"}) or
    a config ({"configurable": {"checkpoint_id"}}). A dict naming none is a 400."""
    if not isinstance(ref, dict):
        return ref
    found = ref.get("checkpoint_id") or (ref.get("configurable") or {}).get("checkpoint_id")
    if not isinstance(found, str):
        raise UsageError(
            'name the checkpoint as {"checkpoint_id": ...} or {"configurable": {"checkpoint_id": ...}}'
        )
    return found


def _status(runs: Runs, database: Database, thread_id: str, head: Any) -> str:
    if runs.active(thread_id, database.runs):
        return "busy"
    if head is not None and head.interrupts:
        return "interrupted"
    last = next(iter(database.runs.of_thread(thread_id, limit=1)), None)
    return "error" if last is not None and last.status == "error" else "idle"


def _matching(views: list[ThreadView], body: ThreadSearch) -> list[ThreadView]:
    wanted = body.metadata or {}
    found = [
        v
        for v in views
        if all(v.metadata.get(k) == value for k, value in wanted.items())
        and (body.ids is None or v.thread_id in body.ids)
    ]
    if sort_by := body.sort_by:
        found.sort(key=lambda v: getattr(v, sort_by), reverse=body.sort_order != "asc")
    return found


def _selected(thread: dict, body: ThreadSearch) -> bool:
    values = thread["values"] or {}
    return (body.status is None or thread["status"] == body.status) and all(
        values.get(k) == v for k, v in (body.values or {}).items()
    )


def _sse(run: Run, *, cancel_on_disconnect: bool) -> StreamingResponse:
    async def frames() -> AsyncIterator[bytes]:
        async for name, data in stream_events(run, cancel_on_disconnect=cancel_on_disconnect):
            yield sse(name, data)

    headers = {
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
        "Content-Location": f"/threads/{run.thread_id}/runs/{run.run_id}",
    }
    return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)


async def _ended(runs: Runs, thread_id: str, run_id: str) -> AnyRun:
    """The run once it has ended: waited for here, or its record looked at again and again (with a
    growing pause) while another server runs it."""
    delay = POLL_FIRST
    while True:
        run = await asyncio.to_thread(runs.get, thread_id, run_id)
        if isinstance(run, Run):
            await asyncio.to_thread(run.done.wait)
            return run
        if not run.active:
            return run
        await asyncio.sleep(delay)
        delay = min(delay * 2, POLL_MOST)


def _recorded_outcome(settings: Settings, record: RunRecord) -> Any:
    if record.error is not None:
        return JSONResponse({"__error__": record.error}, status_code=200)
    values = record_values(settings, record)
    if values is None:
        raise NotFoundError(f"run {record.run_id} ended without a state (status {record.status})")
    return values


def _record_sse(runs: Runs, record: RunRecord) -> StreamingResponse:
    """A run this server does not run: its metadata, then (when it ends) its values or error."""

    async def frames() -> AsyncIterator[bytes]:
        yield sse("metadata", {"run_id": record.run_id, "attempt": 1})
        try:
            run = await _ended(runs, record.thread_id, record.run_id)
        except NotFoundError as exc:  # deleted (or its thread) while this stream waited
            yield sse("error", error_event(exc))
            return
        if isinstance(run, Run):  # this server took it over meanwhile
            async for name, data in stream_events(run, cancel_on_disconnect=False):
                yield sse(name, data)
            return
        if run.error is not None:
            yield sse("error", run.error)
            return
        try:
            values = await asyncio.to_thread(record_values, runs.settings, run)
        except AppError as exc:  # its checkpoint was pruned or rolled away since
            yield sse("error", error_event(exc))
            return
        if values is not None:
            yield sse("values", values)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)


def _outcome(run: Run) -> Any:
    if run.error is not None:
        return JSONResponse({"__error__": error_event(run.error)}, status_code=200)
    if run.values is None:
        raise NotFoundError(f"run {run.run_id} ended without a state (status {run.status})")
    return run.values
