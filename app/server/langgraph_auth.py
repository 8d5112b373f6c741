"""An auth handler for LangGraph's server (`"auth": {"path": "./app/server/langgraph_auth.py:auth"}`
in langgraph.json): the users of Waypoint's users file, each seeing only their own threads, runs,
crons and store items, as under `waypoint serve` with a users file. Use it with APP_MEMORY_SCOPE=user."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth

from app.server.tokens import UsersFile

auth = Auth()
OWNER = "owner"
_users: UsersFile | None = None


def users_file() -> UsersFile:
    """The users file (APP_USERS_FILE, else users.json in the data directory), read once and again
    whenever it changes."""
    global _users
    if _users is None:
        from app.config import default_users_file

        named = os.environ.get("APP_USERS_FILE")
        _users = UsersFile(Path(named) if named else default_users_file())
    return _users


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The user whose token `Authorization: Bearer <token>` carries; else 401."""
    scheme, _, token = (authorization or "").partition(" ")
    user = users_file().user_of(token.strip()) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing or wrong API token")
    return {"identity": user}


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    """A thread made is the caller's; any other action sees only the caller's threads (and their
    runs): another user's is a 404, as a missing one."""
    return _owned(ctx, value)


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    return _owned(ctx, value)


@auth.on.store()
async def own_store(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """Every namespace is the caller's own, under ("users", identity, …): where the memory tools keep
    it with APP_MEMORY_SCOPE=user, and where Aegra keeps each user's items."""
    value["namespace"] = ("users", ctx.user.identity, *(value.get("namespace") or ()))


def _owned(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    mine = {OWNER: ctx.user.identity}
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        metadata.update(mine)  # in place: the server reads back the dict it handed over
    elif "metadata" in value:
        value["metadata"] = dict(mine)
    return mine
