"""The HTTP API and web page: `create_app(settings)` builds the FastAPI app: the LangGraph Server
API (app/server/standard/: assistants, threads, runs, crons, store) that the official SDKs call,
Waypoint's time-travel conveniences, and the page. Sync routes run in FastAPI's thread pool; runs
stream as Server-Sent Events; the cron scheduler runs with the app (its lifespan)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from app.config import Settings
from app.errors import AppError, ConfigError
from app.hosts import allowed_hosts
from app.server import schemas, time_travel
from app.server.errors import error_body, status_for
from app.server.guard import RequestGuard
from app.server.openapi import document
from app.server.standard import (
    assistants,
    crons,
    state,
    stateless_runs,
    store,
    thread_runs,
    threads,
)
from app.server.standard.cron_scheduler import scheduler_lifespan
from app.server.standard.run_recovery import Keeper
from app.server.standard.runs import Runs
from app.server.tokens import UsersFile
from app.server.users import Authenticator, ManyUsers, OneUser, Unauthorized, current_user

STATIC = Path(__file__).parent / "static"


def create_app(
    settings: Settings, api_token: str | None = None, hosts: frozenset[str] | None = None
) -> FastAPI:
    """The app. With `settings.users_file`, every route but /ok, /health and the page shell needs
    `Authorization: Bearer <token>` of a user there, who sees only their own threads, runs, crons
    and store items; else with `api_token`, that token (one user, who sees all). `hosts` are the
    Host names it answers (default: loopback and `settings.allowed_hosts`). No /docs or /redoc:
    FastAPI's pages load Swagger UI from a CDN."""
    runs = Runs(settings)
    auth = authenticator(settings, api_token)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        keeper = Keeper(runs)  # renews this server's leases; takes over runs whose server died
        keeper.start()
        try:
            async with scheduler_lifespan(app):  # the crons, fired once across servers
                yield
        finally:
            keeper.stop()
            runs.workers.close()
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
    app.state.auth = auth
    allowed = hosts if hosts is not None else allowed_hosts("127.0.0.1", settings.allowed_hosts)
    app.add_middleware(RequestGuard, allowed_hosts=allowed, max_body_bytes=settings.max_body_bytes)
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.include_router(_api_routes(), dependencies=[Depends(current_user)])
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/ok", tags=["meta"])
    def ok() -> dict:
        """LangGraph's liveness check."""
        return {"ok": True}

    @app.get("/health", response_model=schemas.Health, tags=["meta"])
    def health() -> dict:
        return {"version": _version(), "model": settings.model_spec, "auth": auth.required}

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    return app


def _version() -> str:
    try:
        return version("waypoint")
    except PackageNotFoundError:
        return "0"


def authenticator(settings: Settings, api_token: str | None) -> Authenticator:
    """A users file's users, or the one user (with `api_token`, only who sends it)."""
    if settings.users_file is None:
        return OneUser(settings, api_token)
    if api_token:
        raise ConfigError(
            "both APP_API_TOKEN and a users file are set: use the users file (each user their "
            "own token), or unset APP_USERS_FILE for one token"
        )
    return ManyUsers(UsersFile(settings.users_file))


async def _app_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, Unauthorized):
        body = {"detail": "missing or wrong API token: send Authorization: Bearer <your token>"}
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
    for resource in (threads, state, thread_runs, stateless_runs, crons, store, time_travel):
        api.include_router(resource.router)
    return api
