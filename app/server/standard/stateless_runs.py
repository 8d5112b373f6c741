"""Stateless runs, as the LangGraph Server API has them: a run on a new thread of its own (the
caller's), streamed, waited for or in the background, one or a batch; the thread is deleted when
the run ends unless "on_completion": "keep"."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Body, Request
from fastapi.responses import StreamingResponse

from app.errors import NotFoundError
from app.server.standard.run_streams import SSE_RESPONSE, outcome, run_events, runs_of
from app.server.standard.runs import Run, RunRequest, started_run, until_set
from app.server.users import Caller, CurrentUser, owned_metadata, server_database
from app.service import api

MAX_BATCH = 100  # stateless runs in one /runs/batch

router = APIRouter(tags=["stateless runs"])


@router.post("/runs/stream", responses=SSE_RESPONSE)
async def stream_stateless(
    request: Request, caller: CurrentUser, body: RunRequest
) -> StreamingResponse:
    """A run on a new thread of its own, streamed; the thread is deleted when the run ends
    (unless "on_completion": "keep")."""
    run, _ = await start_stateless(request, caller, body)
    return await run_events(run, body)


@router.post("/runs/wait")
# No return hint: FastAPI would take it for the response model (the run's values, or an error).
async def wait_stateless(request: Request, caller: CurrentUser, body: RunRequest):
    """A run on a new thread of its own, answered with its values."""
    run, cleanup = await start_stateless(request, caller, body, awaited=True)
    await until_set(run, run.done)
    await asyncio.to_thread(cleanup)
    return outcome(run)


@router.post("/runs")
async def create_stateless(request: Request, caller: CurrentUser, body: RunRequest) -> dict:
    """A run on a new thread of its own, in the background."""
    run, _ = await start_stateless(request, caller, body)
    return run.as_json()


@router.post("/runs/batch")
async def create_stateless_batch(
    request: Request,
    caller: CurrentUser,
    body: Annotated[list[RunRequest], Body(max_length=MAX_BATCH)],
) -> list[dict]:
    """Several stateless runs in the background, each on a thread of its own."""
    return [(await start_stateless(request, caller, one))[0].as_json() for one in body]


async def start_stateless(
    request: Request, caller: Caller, body: RunRequest, *, awaited: bool = False
) -> tuple[Run, Callable[[], None]]:
    """A run on a new thread of the caller's, and what deletes that thread (nothing with
    "on_completion": "keep"). Unless `awaited` (the caller deletes it after the run), the thread
    is deleted once the run has ended, as LangGraph's server does."""
    settings, runs = request.app.state.settings, runs_of(request)
    thread_id = str(uuid.uuid4())

    def create() -> None:
        with server_database(settings) as database:
            metadata = owned_metadata(caller, {"stateless": True})
            api.create_thread(database, thread_id, metadata=metadata)

    def delete() -> None:
        with (
            server_database(settings) as database,
            contextlib.suppress(NotFoundError),  # the client deleted it already
        ):
            api.delete_thread(database, thread_id)
        runs.forget_thread(thread_id)

    await asyncio.to_thread(create)
    try:
        run = await started_run(settings, runs, thread_id, body)
    except Exception:
        await asyncio.to_thread(delete)
        raise
    cleanup = delete if body.on_completion == "delete" else lambda: None
    if not awaited:
        threading.Thread(target=lambda: (run.done.wait(), cleanup()), daemon=True).start()
    return run, cleanup
