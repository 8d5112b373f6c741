"""The run context as plain JSON data: what a LangGraph server's client sends as a run's `context`
(and what `langgraph.json`'s graphs declare as their context schema).

Each field is a per-run setting of graphs/run_settings.py (its bounds and help from there); a field
the client leaves out is None and takes the environment's value (app/config.Settings.with_run).
The graphs' nodes need live objects (a chat model, tools); graphs/shared/live.py turns a RunSpec
into them through the factory the application registers. The application's own front ends pass the
live `AgentContext` directly, so both kinds of run context reach the same nodes."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from graphs.run_settings import ApprovalPolicy, RunSettings, definition, env_name


def _per_run(name: str) -> FieldInfo:
    """Setting `name` as a RunSpec field: None unless the client sets it; the schema shows the
    environment's default (where there is one) and says so."""
    setting = definition(name)
    left_out = f"omitted: the server's {env_name(name)}"
    if setting.default is not None:
        left_out += f" ({setting.default} unless set)"
    field = FieldInfo.from_field(
        None,
        description=f"{setting.description}; {left_out}",
        json_schema_extra={} if setting.default is None else {"default": setting.default},
    )
    field.metadata = list(setting.metadata)  # the bounds
    return field


def _made_from_definitions(cls: type) -> type:
    """Give each field named like a setting of RunSettings that setting's bounds and help."""
    for name in cls.__annotations__:
        if name in RunSettings.model_fields:
            setattr(cls, name, _per_run(name))
    return cls


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
@_made_from_definitions
class RunSpec:
    """What a run may choose; every field may be left out, so an empty context is a valid one."""

    model: str | None = None
    tools: tuple[str, ...] | None = Field(
        default=None,
        description="the tools this run may call, by name; omitted: every tool the server offers",
        max_length=64,
    )
    user: str | None = None
    approval: ApprovalPolicy | None = None
    max_iterations: int | None = None
    max_retries: int | None = None
    max_seconds: float | None = None
    max_tokens_per_turn: int | None = None
    max_trials: int | None = None

    def chosen(self) -> dict[str, Any]:
        """The settings this run set, by name (what it left out is not there)."""
        return {
            name: value
            for name, value in dataclasses.asdict(self).items()
            if name in RunSettings.model_fields and value is not None
        }
