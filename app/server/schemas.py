"""Request and response bodies of the HTTP API (pydantic); shaped like the LangGraph server's."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.config import StrategyName
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


class ThreadCreate(Strict):
    thread_id: str | None = Field(None, description="1-64 of [A-Za-z0-9._-]; made up if omitted")
    if_exists: Literal["raise", "do_nothing"] = "raise"

    _check_id = field_validator("thread_id")(_thread_id)


class InputMessage(Strict):
    role: Literal["user", "human"] = "user"
    content: str


class RunInput(Strict):
    messages: list[InputMessage] = Field(min_length=1)


class RunCreate(Strict):
    """One user turn. Send `message`, or LangGraph's `input.messages` (the last one is used)."""

    message: str | None = None
    input: RunInput | None = None
    approve: Literal["auto", "never"] | None = Field(
        None, description="risky tool calls; default the server's policy (APP_APPROVE, or never)"
    )
    if_not_exists: Literal["reject", "create"] = "reject"
    strategy: StrategyName | None = Field(
        None, description="react | plan | reflexion | routed; default the thread's own (new: react)"
    )
    assistant_id: str | None = Field(None, description="accepted for LangGraph clients; ignored")
    stream_mode: Any = Field(None, description="accepted for LangGraph clients; ignored")

    @model_validator(mode="after")
    def _one_message(self) -> RunCreate:
        if (self.message is None) == (self.input is None):
            raise ValueError('send exactly one of "message" or "input": {"messages": [...]}')
        return self

    @property
    def text(self) -> str:
        return self.message if self.input is None else self.input.messages[-1].content


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


class Thread(BaseModel):
    thread_id: str
    title: str
    turns: int
    checkpoints: int
    updated_at: str
    size_bytes: int = 0
    interrupted: bool = False


class ThreadDetail(Thread):
    head: str
    next: list[str]
    status: str | None
    messages: list[dict]


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


class Deleted(BaseModel):
    thread_id: str
    checkpoints: int
    writes: int
    bytes_freed: int


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    model: str
    auth: bool


class GraphView(BaseModel):
    mermaid: str
    nodes: list[dict]
    edges: list[dict]


class Cancelled(BaseModel):
    thread_id: str
    status: Literal["cancelling"]
