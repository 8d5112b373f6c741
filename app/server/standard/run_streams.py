"""How a run's outcome reaches the client: its events as Server-Sent Events (live, or from its
record when another server runs it), and its values when it ends (`wait`, `join`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from app.config import Settings
from app.db.run_records import RunRecord
from app.errors import AppError, NotFoundError
from app.server.events import sse
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
    started_run,
    stream_events,
    until_set,
)

SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"}
}


class ValuesResponse(JSONResponse):
    """A run's values (JSON data already) as a JSON answer, written by orjson: the whole thread
    state, ~10x faster than `json.dumps` (which was ~8 % of serve's CPU at 8 clients). What orjson
    refuses (an integer over 64 bits) is written by `json.dumps` as before."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except orjson.JSONEncodeError:
            return super().render(content)


def runs_of(request: Request) -> Runs:
    return request.app.state.runs


async def streamed_run(request: Request, thread_id: str, body: RunRequest) -> StreamingResponse:
    """Start a run and answer with its events; a problem before its first event (a busy thread,
    bad input) is a plain HTTP error instead."""
    settings, runs = request.app.state.settings, runs_of(request)
    run = await started_run(settings, runs, thread_id, body)
    return await run_events(run, body)


async def run_events(run: Run, body: RunRequest) -> StreamingResponse:
    problem = await first_problem(run)
    if problem is not None:
        raise problem
    return live_sse(run, cancel_on_disconnect=body.on_disconnect == "cancel")


def live_sse(run: Run, *, cancel_on_disconnect: bool) -> StreamingResponse:
    async def frames() -> AsyncIterator[bytes]:
        async for name, data in stream_events(run, cancel_on_disconnect=cancel_on_disconnect):
            yield sse(name, data)

    headers = {
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
        "Content-Location": f"/threads/{run.thread_id}/runs/{run.run_id}",
    }
    return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)


async def ended(runs: Runs, thread_id: str, run_id: str) -> AnyRun:
    """The run once it has ended: waited for here, or its record looked at again and again (with a
    growing pause) while another server runs it."""
    delay = POLL_FIRST
    while True:
        run = await asyncio.to_thread(runs.get, thread_id, run_id)
        if isinstance(run, Run):
            await until_set(run, run.done)
            return run
        if not run.active:
            return run
        await asyncio.sleep(delay)
        delay = min(delay * 2, POLL_MOST)


def recorded_outcome(settings: Settings, record: RunRecord) -> JSONResponse:
    if record.error is not None:
        return JSONResponse({"__error__": record.error}, status_code=200)
    values = record_values(settings, record)
    if values is None:
        raise NotFoundError(f"run {record.run_id} ended without a state (status {record.status})")
    return ValuesResponse(values)


def record_sse(runs: Runs, record: RunRecord) -> StreamingResponse:
    """A run this server does not run: its metadata, then (when it ends) its values or error."""

    async def frames() -> AsyncIterator[bytes]:
        yield sse("metadata", {"run_id": record.run_id, "attempt": 1})
        try:
            run = await ended(runs, record.thread_id, record.run_id)
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


def outcome(run: Run) -> JSONResponse:
    """The run's final values or its error. The values are JSON data already: returned as a
    response, FastAPI does not walk the whole state again (`jsonable_encoder`, ~10 % of serve's CPU).
    """
    if run.error is not None:
        return JSONResponse({"__error__": error_event(run.error)}, status_code=200)
    if run.values is None:
        raise NotFoundError(f"run {run.run_id} ended without a state (status {run.status})")
    return ValuesResponse(run.values)
