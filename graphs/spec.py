"""The run context as plain JSON data: what a LangGraph server's client sends as a run's `context`
(and what `langgraph.json`'s graphs declare as their context schema).

The graphs' nodes need live objects (a chat model, tools); graphs/shared/live.py turns a RunSpec
into them through the factory the application registers. The application's own front ends pass the
live `AgentContext` directly, so both kinds of run context reach the same nodes."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class RunSpec:
    """What a run may choose; every field has a default, so an empty context is a valid one."""

    model: str | None = Field(
        default=None,
        description="offline (embedded, no network) or openai:<name> (any OpenAI-compatible "
        "endpoint, from OPENAI_BASE_URL / OPENAI_API_KEY on the server); omitted: the server's "
        "own (APP_MODEL, else offline)",
        min_length=1,
        max_length=200,
    )
    tools: tuple[str, ...] | None = Field(
        default=None,
        description="the tools this run may call, by name; omitted: every tool the server offers",
        max_length=64,
    )
    user: str = Field(
        default="default",
        description="whose long-term memory the memory tools use",
        pattern=r"^[A-Za-z0-9._@-]{1,64}$",
    )
    approval: Literal["ask", "auto", "never"] = Field(
        default="ask",
        description="risky tool calls: ask (the run pauses with an interrupt; resume it with a "
        "command), auto (run them) or never (refuse them)",
    )
    max_iterations: int = Field(default=8, ge=1, le=100, description="model steps per turn")
    max_retries: int = Field(default=3, ge=0, le=20, description="retries per turn")
    max_seconds: float | None = Field(
        default=None, gt=0, le=86_400, description="wall-time budget per turn, in seconds"
    )
    max_tokens_per_turn: int | None = Field(
        default=None, ge=1, description="model-token budget per turn"
    )
    max_trials: int = Field(default=3, ge=1, le=10, description="reflexion: attempts per turn")
