"""A thread's state, as the LangGraph Server API has it: at the head or a checkpoint,
update_state (on the head or as a branch from a checkpoint), and the history of checkpoints."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Field

from app.db.base import Database
from app.errors import UsageError
from app.server.standard.wire import state_json, state_values
from app.server.users import Db, OwnedThreadId
from app.service import api

router = APIRouter(tags=["state"])


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


class CheckpointRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    checkpoint: dict = Field(default_factory=dict)
    subgraphs: bool = False


@router.get("/threads/{thread_id}/state")
def get_state(thread_id: OwnedThreadId, database: Db, subgraphs: bool = False) -> dict:
    return state_json(api.head_state(database, thread_id, None))


@router.get("/threads/{thread_id}/state/{checkpoint_id}")
def get_state_at(
    thread_id: OwnedThreadId, checkpoint_id: str, database: Db, subgraphs: bool = False
) -> dict:
    return state_json(api.head_state(database, thread_id, checkpoint_id))


@router.post("/threads/{thread_id}/state/checkpoint")
def get_state_at_checkpoint(
    thread_id: OwnedThreadId, database: Db, body: CheckpointRequest
) -> dict:
    checkpoint_id = body.checkpoint.get("checkpoint_id")
    return state_json(api.head_state(database, thread_id, checkpoint_id))


@router.post("/threads/{thread_id}/state")
def update_state(thread_id: OwnedThreadId, database: Db, body: StateUpdate) -> dict:
    """Write values as `as_node` would, on the head or on `checkpoint` (a branch from it)."""
    checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    written = api.update_state(
        database,
        thread_id,
        state_values(body.values),
        as_node=body.as_node,
        checkpoint_id=checkpoint_id,
    )
    return {"checkpoint": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": written}}


@router.get("/threads/{thread_id}/history")
def history_get(
    thread_id: OwnedThreadId,
    database: Db,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    before: str | None = None,
) -> list:
    return _history(database, thread_id, HistoryRequest(limit=limit, before=before))


@router.post("/threads/{thread_id}/history")
def history_post(
    thread_id: OwnedThreadId, database: Db, body: Annotated[HistoryRequest | None, Body()] = None
) -> list:
    return _history(database, thread_id, body or HistoryRequest())


def _history(database: Database, thread_id: str, body: HistoryRequest) -> list:
    before = checkpoint_id_of(body.before)
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
