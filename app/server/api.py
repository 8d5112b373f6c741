"""The HTTP API and web page: `create_app(settings)` builds the FastAPI app: the LangGraph Server
API (app/server/standard/: assistants, threads, runs, crons, store) that the official SDKs call,
Waypoint's time-travel conveniences, and the page. Sync routes run in FastAPI's thread pool; runs
stream as Server-Sent Events; the cron scheduler runs with the app (its lifespan)."""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator, Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles

from app.config import Settings
from app.db import open_database
from app.errors import AppError, NotFoundError
from app.hosts import allowed_hosts
from app.server import schemas, timeline
from app.server.diagram import graph_view
from app.server.errors import error_body, status_for
from app.server.guard import RequestGuard
from app.server.openapi import document
from app.server.params import ThreadId
from app.server.standard import assistants, crons, store, threads
from app.server.standard.cron_scheduler import scheduler_lifespan
from app.server.standard.run_recovery import Keeper
from app.server.standard.runs import RunRequest, Runs
from app.service.session import new_thread_id
from graphs.strategies import UnknownStrategyError

STATIC = Path(__file__).parent / "static"


def create_app(
    settings: Settings, api_token: str | None = None, hosts: frozenset[str] | None = None
) -> FastAPI:
    """The app. With `api_token`, every route but /ok, /health and the page shell needs
    `Authorization: Bearer <token>`. `hosts` are the Host names it answers (default: loopback and
    `settings.allowed_hosts`). No /docs or /redoc: FastAPI's pages load Swagger UI from a CDN."""
    runs = Runs(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        keeper = Keeper(runs)  # renews this server's leases; takes over runs whose server died
        keeper.start()
        try:
            async with scheduler_lifespan(app):  # the crons, fired once across servers
                yield
        finally:
            keeper.stop()
            runs.close()

    app = FastAPI(
        lifespan=lifespan,
        title="Waypoint",
        version=_version(),
        description="A LangGraph agent whose every step is a durable checkpoint.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.runs = runs
    allowed = hosts if hosts is not None else allowed_hosts("127.0.0.1", settings.allowed_hosts)
    app.add_middleware(RequestGuard, allowed_hosts=allowed, max_body_bytes=settings.max_body_bytes)
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.include_router(_api_routes(), dependencies=[Depends(_bearer(api_token))])
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/ok", tags=["meta"])
    def ok() -> dict:
        """LangGraph's liveness check."""
        return {"ok": True}

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


def _bearer(api_token: str | None) -> Callable[[Request], None]:
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


def _api_routes() -> APIRouter:
    api = APIRouter()

    @api.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        return JSONResponse(document(request.app))

    @api.get("/info", tags=["meta"])
    def info() -> dict:
        return {"version": _version(), "flags": {"assistants": True, "crons": True}}

    api.include_router(assistants.routes())
    api.include_router(threads.routes())
    api.include_router(crons.routes())
    api.include_router(store.routes())
    api.include_router(_conveniences())
    return api


def _conveniences() -> APIRouter:
    """Waypoint's own routes, over the same services as the standard ones: the graph as Mermaid,
    a thread's timeline (turns, checkpoints, branch tree), rollback, fork and replay."""
    api = APIRouter(tags=["time travel"])

    @api.get("/graph", response_model=schemas.GraphView, tags=["meta"])
    def graph(strategy: Annotated[str, Query(max_length=40)] = "react") -> dict:
        """A strategy's state machine (default: the tool loop): Mermaid text, nodes and edges."""
        try:
            return graph_view(strategy)
        except UnknownStrategyError as exc:
            raise NotFoundError(str(exc)) from None

    @api.get("/threads/{thread_id}/timeline", response_model=schemas.History)
    def history(
        request: Request,
        thread_id: ThreadId,
        limit: Annotated[int, Query(ge=1, le=1000)] = timeline.TURNS_SHOWN,
    ) -> dict:
        """Turns (newest first), every checkpoint with its parent, and the branch tree."""
        with open_database(request.app.state.settings.database) as database:
            return timeline.history(database, thread_id, limit)

    @api.post("/threads/{thread_id}/rollback", response_model=schemas.RollbackResult)
    def rollback(request: Request, thread_id: ThreadId, body: schemas.RollbackRequest) -> dict:
        """Make an earlier checkpoint the head again (nothing is deleted; undo with previous_head)."""
        settings = request.app.state.settings
        with open_database(settings.database, settings.busy_timeout) as database:
            return timeline.do_rollback(database, settings, thread_id, body)

    @api.post("/threads/{thread_id}/fork", response_model=schemas.ForkResult, status_code=201)
    def fork(request: Request, thread_id: ThreadId, body: schemas.ForkRequest) -> dict:
        """Copy the thread at a checkpoint (default: the head) into a new thread."""
        settings = request.app.state.settings
        with open_database(settings.database, settings.busy_timeout) as database:
            return timeline.do_fork(database, settings, thread_id, body.to or new_thread_id(), body)

    @api.post("/threads/{thread_id}/replay", responses=threads.SSE_RESPONSE)
    async def replay(
        request: Request, thread_id: ThreadId, body: schemas.ReplayRequest
    ) -> StreamingResponse:
        """Re-run the graph from a checkpoint on a new branch, streamed like a run (custom and
        updates modes); tools with side effects run again only with `confirm`."""
        run_request = RunRequest(
            assistant_id="waypoint",
            checkpoint_id=body.checkpoint_id,
            stream_mode=["custom", "updates"],
            keep_files=body.keep_files,
            force=body.force,
            confirm=body.confirm,
            final_event=True,
            multitask_strategy="reject",
        )
        return await threads.streamed_run(request, thread_id, run_request)

    return api
