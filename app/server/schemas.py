"""Request and response bodies of Waypoint's own routes (the conveniences; the LangGraph Server API's
bodies are in app/server/standard/)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.errors import UsageError
from app.service.history import TurnSummary
from app.store import validate_thread_id


def _thread_id(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return validate_thread_id(value)
    except UsageError as exc:
        raise ValueError(str(exc)) from None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RollbackRequest(Strict):
    turns: int | None = Field(None, ge=1, description="undo the last N turns")
    checkpoint_id: str | None = Field(None, description="an id, or a unique 6+ character part")
    keep_files: bool = False
    force: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> RollbackRequest:
        if (self.turns is None) == (self.checkpoint_id is None):
            raise ValueError('give exactly one of "turns" or "checkpoint_id"')
        return self


class ForkRequest(Strict):
    to: str | None = Field(None, description="the new thread's id; made up if omitted")
    checkpoint_id: str | None = Field(None, description="default: the head")
    keep_files: bool = False
    force: bool = False

    _check_to = field_validator("to")(_thread_id)


class ReplayRequest(Strict):
    checkpoint_id: str
    confirm: bool = Field(False, description="allow re-running tools with side effects")
    approve: Literal["auto", "never"] | None = None
    keep_files: bool = False
    force: bool = False


class Checkpoint(BaseModel):
    checkpoint_id: str
    parent_id: str | None
    step: int
    source: str
    turn: int | None
    node: str
    preview: str
    note: str
    created_at: str
    on_branch: bool = False
    head: bool = False


class Segment(BaseModel):
    """A run of checkpoints of one turn; `branches` are the other branches that split off after it."""

    turn: int | None
    preview: str
    first: str
    last: str
    checkpoints: int
    note: str
    head: bool
    on_branch: bool
    branches: list[list[Segment]] = []


class History(BaseModel):
    thread_id: str
    head: str
    turns: list[TurnSummary]
    checkpoints: list[Checkpoint]
    tree: list[Segment]


class RollbackResult(BaseModel):
    thread_id: str
    head: str
    target: Checkpoint
    previous_head: str
    undone_turns: list[dict]
    workspace: list[str]
    pending: list[str]


class ForkResult(BaseModel):
    thread_id: str
    forked_from: dict
    head: str
    workspace: list[str]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    model: str
    auth: bool


class GraphView(BaseModel):
    strategy: str
    mermaid: str
    nodes: list[dict]
    edges: list[dict]
