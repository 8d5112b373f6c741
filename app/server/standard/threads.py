"""Threads, as the LangGraph Server API has them: create (with metadata), get, search, count,
update, copy, delete, prune, and join the running run's stream. Under a users file each thread
has an owner (its metadata's "owner", set by the server) and a caller sees only their own."""

from __future__ import annotations

import contextlib
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from app.db.base import Database
from app.errors import ConflictError, NotFoundError, UsageError
from app.server.standard.run_streams import SSE_RESPONSE, live_sse, record_sse, runs_of
from app.server.standard.runs import Run, Runs
from app.server.standard.wire import jsonable, task_interrupts
from app.server.users import (
    Caller,
    CurrentUser,
    Db,
    OwnedThreadId,
    owned_metadata,
    owned_view,
    owner_of,
)
from app.service import api
from app.service.api import ThreadView

router = APIRouter(tags=["threads"])


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


def thread_json(runs: Runs, database: Database, view: ThreadView) -> dict:
    head = api.head_state(database, view.thread_id)
    return {
        "thread_id": view.thread_id,
        "created_at": view.created_at,
        "updated_at": view.updated_at,
        "state_updated_at": view.updated_at,
        "metadata": view.metadata,
        "status": _status(runs, database, view.thread_id, head),
        "config": {},
        "values": jsonable(head.values) if head is not None else None,
        "interrupts": task_interrupts(head),
    }


@router.post("/threads")
def create_thread(
    request: Request,
    caller: CurrentUser,
    database: Db,
    body: Annotated[ThreadCreate | None, Body()] = None,
) -> dict:
    body = body or ThreadCreate()
    thread_id = body.thread_id or str(uuid.uuid4())
    metadata = owned_metadata(caller, body.metadata)
    view, made = api.create_thread(database, thread_id, metadata=metadata, if_exists=body.if_exists)
    if not made and not caller.owns(owner_of(view)):
        # another user's: a conflict, as a taken id must be (LangGraph's server answers the same)
        raise ConflictError(f"thread {thread_id} already exists")
    return thread_json(runs_of(request), database, view)


@router.post("/threads/search")
def search_threads(
    request: Request,
    caller: CurrentUser,
    database: Db,
    body: Annotated[ThreadSearch | None, Body()] = None,
) -> list:
    return _search(runs_of(request), database, caller, body or ThreadSearch())


@router.post("/threads/count")
def count_threads(
    request: Request,
    caller: CurrentUser,
    database: Db,
    body: Annotated[ThreadSearch | None, Body()] = None,
) -> int:
    body = (body or ThreadSearch()).model_copy(update={"limit": 1000, "offset": 0})
    return len(_search(runs_of(request), database, caller, body))


@router.post("/threads/prune")
def prune_threads(request: Request, caller: CurrentUser, database: Db, body: ThreadPrune) -> dict:
    """Delete these threads (those that do not exist, or are another user's, are not counted).
    Keeping only the latest state is the CLI's `threads prune --keep-last-turns 1`."""
    if body.strategy != "delete":
        raise UsageError(
            'only "strategy": "delete" is supported; to keep a thread\'s last turn only, run '
            "`python -m app threads prune --keep-last-turns 1`"
        )
    runs, pruned = runs_of(request), 0
    for thread_id in body.thread_ids:
        with contextlib.suppress(NotFoundError):
            owned_view(database, caller, thread_id)
            if runs.active(thread_id):
                raise ConflictError(f"thread {thread_id} is running a run; cancel it first")
            api.delete_thread(database, thread_id)
            pruned += 1
            runs.forget_thread(thread_id)
    return {"pruned_count": pruned}


@router.get("/threads/{thread_id}")
def get_thread(request: Request, thread_id: OwnedThreadId, database: Db) -> dict:
    return thread_json(runs_of(request), database, api.thread_view(database, thread_id))


@router.patch("/threads/{thread_id}")
def update_thread(
    request: Request, thread_id: OwnedThreadId, caller: CurrentUser, database: Db, body: ThreadPatch
) -> dict:
    patch = owned_metadata(caller, body.metadata)
    view = api.update_thread_metadata(database, thread_id, patch)
    return thread_json(runs_of(request), database, view)


@router.delete("/threads/{thread_id}", status_code=204)
def delete_thread(request: Request, thread_id: OwnedThreadId, database: Db) -> Response:
    api.delete_thread(database, thread_id)  # its runs' records go with it
    request.app.state.runs.heads.forget(thread_id)  # and the head its last run here left
    return Response(status_code=204)


@router.post("/threads/{thread_id}/copy")
def copy_thread(request: Request, thread_id: OwnedThreadId, database: Db) -> dict:
    """A new thread with the whole history and metadata (so the same owner) of this one."""
    view = api.copy_thread(database, thread_id, str(uuid.uuid4()))
    return thread_json(runs_of(request), database, view)


@router.get("/threads/{thread_id}/stream", responses=SSE_RESPONSE)
def join_thread_stream(
    request: Request, thread_id: OwnedThreadId, database: Db
) -> StreamingResponse:
    """The thread's running run's events from its start, live until it ends (none running:
    an empty stream)."""
    api.thread_view(database, thread_id)  # a missing thread is a 404
    runs = runs_of(request)
    active = runs.active(thread_id)
    if not active:
        return StreamingResponse(iter(()), media_type="text/event-stream")
    if isinstance(active[0], Run):
        return live_sse(active[0], cancel_on_disconnect=False)
    return record_sse(runs, active[0])  # running on another server


def _search(runs: Runs, database: Database, caller: Caller, body: ThreadSearch) -> list:
    page = slice(body.offset, body.offset + body.limit)
    by_state = body.status is not None or body.values is not None
    views = [v for v in _matching(api.thread_views(database), body) if caller.owns(owner_of(v))]
    # a thread's state is loaded only for the page, unless a filter needs every one
    found = [thread_json(runs, database, v) for v in (views if by_state else views[page])]
    return [t for t in found if _selected(t, body)][page] if by_state else found


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
    if body.sort_by:
        by = body.sort_by
        found.sort(key=lambda v: getattr(v, by), reverse=body.sort_order != "asc")
    return found


def _selected(thread: dict, body: ThreadSearch) -> bool:
    values = thread["values"] or {}
    return (body.status is None or thread["status"] == body.status) and all(
        values.get(k) == v for k, v in (body.values or {}).items()
    )
