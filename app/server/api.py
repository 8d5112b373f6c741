"""The HTTP API and web page: `create_app(settings)` builds the FastAPI app (routes shaped like the
LangGraph server's). Sync routes run in FastAPI's thread pool; runs stream as Server-Sent Events."""

from __future__ import annotations

import hmac
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from app.config import Settings
from app.db import open_database
from app.errors import AppError
from app.server import runs, schemas, timeline
from app.server.diagram import graph_view
from app.server.errors import NotFoundError, error_body, status_for
from app.server.guard import RequestGuard
from app.server.hosts import allowed_hosts
from app.service import api as service
from app.service.session import new_thread_id
from app.service.threads import list_threads as thread_rows
from app.service.threads import thread_exists
from app.store import validate_thread_id

STATIC = Path(__file__).parent / "static"
SSE_RESPONSE = {200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"}}


def create_app(
    settings: Settings, api_token: str | None = None, hosts: frozenset[str] | None = None
) -> FastAPI:
    """The app. With `api_token`, every route but /health and the page shell needs
    `Authorization: Bearer <token>`. `hosts` are the Host names it answers (default: loopback and
    `settings.allowed_hosts`). No /docs or /redoc: FastAPI's pages load Swagger UI from a CDN."""
    app = FastAPI(
        title="Waypoint",
        version=_version(),
        description="A LangGraph agent whose every step is a durable checkpoint.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.active_runs = runs.ActiveRuns()
    allowed = hosts if hosts is not None else allowed_hosts("127.0.0.1", settings.allowed_hosts)
    app.add_middleware(RequestGuard, allowed_hosts=allowed, max_body_bytes=settings.max_body_bytes)
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.include_router(_api_routes(), dependencies=[Depends(_bearer(api_token))])
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/health", response_model=schemas.Health, tags=["meta"])
    def health() -> dict:
        return {"version": _version(), "model": settings.model_spec, "auth": bool(api_token)}

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    return app


def _version() -> str:
    try:
        return version("waypoint")
    except PackageNotFoundError:
        return "0"


def _bearer(api_token: str | None):  # type: ignore[no-untyped-def]
    def check(request: Request) -> None:
        if not api_token:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), api_token):
            raise _Unauthorized()

    return check


class _Unauthorized(AppError):
    """Raised when a request lacks the server's bearer token."""


async def _app_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, _Unauthorized):
        body = {"detail": "missing or wrong API token: send Authorization: Bearer <APP_API_TOKEN>"}
        return JSONResponse(body, 401, headers={"WWW-Authenticate": "Bearer"})
    assert isinstance(exc, AppError)
    return JSONResponse(error_body(exc), status_for(exc))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        f"{'.'.join(str(p) for p in e['loc'])}: {str(e['msg']).removeprefix('Value error, ')}"
        for e in exc.errors()
    ]
    errors = [{k: e[k] for k in ("loc", "msg", "type")} for e in exc.errors()]
    return JSONResponse({"detail": "; ".join(problems), "errors": errors}, 422)


def _thread(thread_id: str) -> str:
    return validate_thread_id(thread_id)


ThreadId = Annotated[str, Depends(_thread)]


def _api_routes() -> APIRouter:
    api = APIRouter()

    @api.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        return JSONResponse(request.app.openapi())

    @api.get("/graph", response_model=schemas.GraphView, tags=["meta"])
    def graph() -> dict:
        """The state machine: Mermaid text and its nodes and edges."""
        return graph_view()

    @api.post("/threads", response_model=schemas.ThreadDetail, status_code=201, tags=["threads"])
    def create_thread(request: Request, body: schemas.ThreadCreate, response: Response) -> dict:
        settings = request.app.state.settings
        thread_id = body.thread_id or new_thread_id()
        with open_database(settings.database, settings.busy_timeout) as database:
            if not service.create_thread(database, thread_id, if_exists=body.if_exists):
                response.status_code = 200
            return timeline.thread_detail(database, settings, thread_id)

    @api.get("/threads", response_model=list[schemas.Thread], tags=["threads"])
    def list_threads(
        request: Request,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list:
        settings = request.app.state.settings
        with open_database(settings.database, settings.busy_timeout) as database:
            found = thread_rows(database)
        return [t.as_dict() for t in found[offset : offset + limit]]

    @api.get("/threads/{thread_id}", response_model=schemas.ThreadDetail, tags=["threads"])
    def get_thread(request: Request, thread_id: ThreadId) -> dict:
        settings = request.app.state.settings
        with open_database(settings.database, settings.busy_timeout) as database:
            return timeline.thread_detail(database, settings, thread_id)

    @api.delete("/threads/{thread_id}", response_model=schemas.Deleted, tags=["threads"])
    def delete_thread(request: Request, thread_id: ThreadId) -> dict:
        settings = request.app.state.settings
        with open_database(settings.database, settings.busy_timeout) as database:
            return service.delete_thread(database, thread_id).as_dict()

    @api.post("/threads/{thread_id}/runs/stream", responses=SSE_RESPONSE, tags=["runs"])
    async def stream_run(
        request: Request, thread_id: ThreadId, body: schemas.RunCreate
    ) -> StreamingResponse:
        """One user turn, streamed: metadata, then the `--jsonl` events, final, end."""
        settings = request.app.state.settings
        policy = runs.run_policy(settings, body.approve)
        if body.if_not_exists == "reject":
            await run_in_threadpool(_must_exist, settings, thread_id)
        job = runs.turn_job(body.text)
        active = request.app.state.active_runs
        events = await runs.start(settings, thread_id, policy, job, active, body.strategy)
        return _event_stream(events)

    @api.post(
        "/threads/{thread_id}/runs/cancel",
        status_code=202,
        response_model=schemas.Cancelled,
        tags=["runs"],
    )
    def cancel_run(request: Request, thread_id: ThreadId) -> dict:
        """Stop the thread's running turn after its current step, as Ctrl-C does in the terminal
        (the run's stream then ends with status `cancelled`). Only runs of this server process."""
        if not request.app.state.active_runs.cancel(thread_id):
            raise NotFoundError(
                f"no run is in progress on thread {thread_id} in this server; "
                "a run started through another server must be cancelled there"
            )
        return {"thread_id": thread_id, "status": "cancelling"}

    @api.get("/threads/{thread_id}/history", response_model=schemas.History, tags=["time travel"])
    def history(
        request: Request,
        thread_id: ThreadId,
        limit: Annotated[int, Query(ge=1, le=1000)] = timeline.TURNS_SHOWN,
    ) -> dict:
        """Turns (newest first), every checkpoint with its parent, and the branch tree."""
        with open_database(request.app.state.settings.database) as database:
            return timeline.history(database, thread_id, limit)

    @api.post(
        "/threads/{thread_id}/rollback", response_model=schemas.RollbackResult, tags=["time travel"]
    )
    def rollback(request: Request, thread_id: ThreadId, body: schemas.RollbackRequest) -> dict:
        """Make an earlier checkpoint the head again (nothing is deleted; undo with previous_head)."""
        settings = request.app.state.settings
        with open_database(settings.database, settings.busy_timeout) as database:
            return timeline.do_rollback(database, settings, thread_id, body)

    @api.post(
        "/threads/{thread_id}/fork",
        response_model=schemas.ForkResult,
        status_code=201,
        tags=["time travel"],
    )
    def fork(request: Request, thread_id: ThreadId, body: schemas.ForkRequest) -> dict:
        """Copy the thread at a checkpoint (default: the head) into a new thread."""
        settings = request.app.state.settings
        with open_database(settings.database, settings.busy_timeout) as database:
            return timeline.do_fork(database, settings, thread_id, body.to or new_thread_id(), body)

    @api.post("/threads/{thread_id}/replay", responses=SSE_RESPONSE, tags=["time travel"])
    async def replay(
        request: Request, thread_id: ThreadId, body: schemas.ReplayRequest
    ) -> StreamingResponse:
        """Re-run the graph from a checkpoint on a new branch, streamed like a run."""
        settings = request.app.state.settings
        policy = runs.run_policy(settings, body.approve)
        await run_in_threadpool(_must_exist, settings, thread_id)
        job = runs.replay_job(settings, body)
        events = await runs.start(settings, thread_id, policy, job, request.app.state.active_runs)
        return _event_stream(events)

    return api


def _must_exist(settings: Settings, thread_id: str) -> None:
    with open_database(settings.database, settings.busy_timeout) as database:
        if not thread_exists(database, thread_id):
            raise NotFoundError(
                f"thread {thread_id} does not exist; create it with POST /threads, "
                'or send "if_not_exists": "create"'
            )


def _event_stream(events) -> StreamingResponse:  # type: ignore[no-untyped-def]
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)
