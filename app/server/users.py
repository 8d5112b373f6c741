"""Who is asking and what they may see: the bearer token's user (`CurrentUser`), the database
(`Db`), and the owner checks every thread, run, cron and store route makes. With a users file each
user sees only what they own (another's is a 404); with one token (or none) the one user sees all."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from fastapi import Depends, Request

from app.config import Settings
from app.db import open_database
from app.db.base import Database
from app.errors import AppError, ThreadNotFoundError, UsageError
from app.server.params import ThreadId
from app.server.tokens import UsersFile
from app.service import api
from app.service.api import ThreadView
from app.service.memory import memory_user
from graphs.spec import RunSpec

OWNER = "owner"  # the thread metadata key LangGraph's auth examples use for the same purpose
# The memory of a run on a thread with no owner, under a users file (a thread made by the CLI):
# a name no user can have (app/server/tokens.RESERVED_NAMES), so it reads nobody's memory.
NOBODY = "users"


@dataclass(frozen=True)
class Caller:
    """The user a request acts for; `scoped`: it sees only what it owns (a users file)."""

    user: str
    scoped: bool

    def owns(self, owner: Any) -> bool:
        return not self.scoped or owner == self.user


class Unauthorized(AppError):
    """Raised when a request lacks a valid bearer token."""


class Authenticator(Protocol):
    required: bool
    blocking: bool  # `caller` reads files or hashes: run it off the event loop

    def caller(self, token: str | None) -> Caller | None: ...


class OneUser:
    """One token (APP_API_TOKEN) or none: the settings' user, who sees every thread."""

    blocking = False

    def __init__(self, settings: Settings, token: str | None) -> None:
        self.user, self.token, self.required = memory_user(settings), token, bool(token)

    def caller(self, token: str | None) -> Caller | None:
        if self.token and not hmac.compare_digest((token or "").encode(), self.token.encode()):
            return None
        return Caller(self.user, scoped=False)


class ManyUsers:
    """A users file: each token is its user's, who sees only what they own."""

    required = True
    blocking = True  # the file is looked at again, the token hashed

    def __init__(self, users: UsersFile) -> None:
        self.users = users

    def caller(self, token: str | None) -> Caller | None:
        user = self.users.user_of(token) if token else None
        return Caller(user, scoped=True) if user else None


async def current_user(request: Request) -> Caller:
    """The request's user, from `Authorization: Bearer <token>` (401 without a valid one). Async:
    FastAPI runs a plain function dependency in a worker thread, a hop per request (~3 % of
    serve's CPU at 8 clients) that one token's comparison does not need."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    token = given.strip() if scheme.lower() == "bearer" else None
    auth: Authenticator = request.app.state.auth
    caller = await asyncio.to_thread(auth.caller, token) if auth.blocking else auth.caller(token)
    if caller is None:
        raise Unauthorized("missing or wrong API token")
    return caller


def server_database(settings: Settings) -> contextlib.AbstractContextManager[Database]:
    """The server's database, opened the one way the server opens it (for work off a request:
    a run's thread, the cron scheduler; a route takes `Db`)."""
    return open_database(settings.database, settings.busy_timeout)


def database(request: Request) -> Iterator[Database]:
    """The server's database, open for the request."""
    with server_database(request.app.state.settings) as opened:
        yield opened


def settings_of(request: Request) -> Settings:
    return request.app.state.settings


CurrentUser = Annotated[Caller, Depends(current_user)]
Db = Annotated[Database, Depends(database)]
ServerSettings = Annotated[Settings, Depends(settings_of)]


def owner_of(view: ThreadView) -> Any:
    return view.metadata.get(OWNER)


def owned_view(database: Database, caller: Caller, thread_id: str) -> ThreadView:
    """The thread if the caller may see it; another user's is "does not exist", as a missing one."""
    view = api.thread_view(database, thread_id)
    if not caller.owns(owner_of(view)):
        raise ThreadNotFoundError(thread_id)
    return view


def owned_thread(request: Request, thread_id: ThreadId, caller: CurrentUser) -> str:
    """The path's thread id once the caller may see the thread (with one user: no check)."""
    if caller.scoped:
        settings = settings_of(request)
        with server_database(settings) as opened:
            owned_view(opened, caller, thread_id)
    return thread_id


OwnedThreadId = Annotated[str, Depends(owned_thread)]


def owned_metadata(caller: Caller, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """A client's thread metadata with the caller as its owner (the owner is the server's to set)."""
    metadata = dict(metadata or {})
    if not caller.scoped:
        return metadata
    if metadata.get(OWNER, caller.user) != caller.user:
        raise UsageError(f'metadata "{OWNER}" is set by the server: you are {caller.user}')
    return metadata | {OWNER: caller.user}


def claim_thread(settings: Settings, caller: Caller, thread_id: str, if_not_exists: str) -> None:
    """Before a run: the thread must be the caller's; with "create", a missing one is made theirs."""
    if not caller.scoped:
        return
    with server_database(settings) as opened:
        if if_not_exists == "create":
            view, made = api.create_thread(
                opened, thread_id, metadata=owned_metadata(caller, {}), if_exists="do_nothing"
            )
            if not made and not caller.owns(owner_of(view)):
                raise ThreadNotFoundError(thread_id)
            return
        owned_view(opened, caller, thread_id)


def thread_owner(settings: Settings, thread_id: str) -> str | None:
    """The user who owns the thread (whose memory its runs use), or None: no owner recorded."""
    try:
        with server_database(settings) as opened:
            owner = owner_of(api.thread_view(opened, thread_id))
    except AppError:
        return None
    return owner if isinstance(owner, str) and owner else None


def owners_spec(settings: Settings, spec: RunSpec, thread_id: str) -> RunSpec:
    """The run's settings with the thread owner's memory: a client's context cannot name
    another user's (with one user, the context's `user` is kept, as before)."""
    if settings.users_file is None:
        return spec
    return dataclasses.replace(spec, user=thread_owner(settings, thread_id) or NOBODY)
