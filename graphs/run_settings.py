"""Every setting a run works under, each defined once (name, type, default, bounds, help): the
environment's settings (app/config.Settings, APP_*) inherit them, a run's JSON context
(graphs/spec.RunSpec) offers the per-run ones, the CLI's options and the live context's limits
(graphs/state.AgentContext) are made from them."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field
from pydantic.fields import FieldInfo

# Risky tool calls: ask (pause for an answer), auto (run them) or never (refuse them).
ApprovalPolicy = Literal["ask", "auto", "never"]


class RunSettings(BaseModel):
    """The settings of a run. For `model`, `user` and `approval` None means "the front end
    decides" (offline unless an endpoint is configured; the OS user; ask on a terminal or a server,
    never when piped); for a budget it means none."""

    # --- what a run's context may choose (RunSpec) --------------------------------------------
    model: str | None = Field(
        None,
        description="offline (embedded, no network) or openai:<name> (any OpenAI-compatible "
        "endpoint, from OPENAI_BASE_URL / OPENAI_API_KEY)",
        min_length=1,
        max_length=200,
    )
    user: str | None = Field(
        None,
        description="whose long-term memory the memory tools use; default: the OS user",
        pattern=r"^[A-Za-z0-9._@-]{1,64}$",
    )
    # `approve` is the CLI flag's and the environment's name (--approve, APP_APPROVE)
    approval: ApprovalPolicy | None = Field(
        None,
        description="risky tool calls: ask (the run pauses for an answer: a question on a "
        "terminal, an interrupt a client resumes on a server), auto (run them) or never (refuse "
        "them); default: ask on a terminal or a server, never when piped",
        validation_alias=AliasChoices("approval", "approve"),
    )
    max_iterations: int = Field(8, ge=1, le=100, description="model steps per turn")
    max_retries: int = Field(3, ge=0, le=20, description="retries per turn")
    max_seconds: float | None = Field(
        None,
        gt=0,
        le=86_400,
        description="time budget per turn in seconds, model requests and retry waits included",
    )
    max_tokens_per_turn: int | None = Field(
        None, ge=1, description="model-token budget per turn, where the endpoint reports usage"
    )
    max_trials: int = Field(3, ge=1, le=10, description="reflexion: attempts per turn")

    # --- the environment's alone --------------------------------------------------------------
    backoff_base: float = Field(0.5, ge=0, le=60, description="first retry wait, in seconds")
    backoff_cap: float = Field(8.0, ge=0, le=3600, description="longest retry wait, in seconds")
    max_retry_after: float = Field(
        60.0, ge=0, le=86_400, description="longest Retry-After a retry waits, in seconds"
    )
    max_tool_result_chars: int = Field(
        4000, ge=200, description="a tool result's length the model sees"
    )
    context_tokens: int | None = Field(
        32_000, ge=500, description="token budget of the messages sent to the model"
    )
    max_output_tokens: int = Field(4096, ge=16, description="cap on each model reply")
    model_timeout: float = Field(
        60.0, gt=0, le=86_400, description="seconds to wait for a model reply"
    )


DEFAULTS = RunSettings()
ENV_PREFIX = "APP_"


def definition(name: str) -> FieldInfo:
    """The one definition of setting `name` (its type, default, bounds and help)."""
    return RunSettings.model_fields[name]


def env_name(name: str) -> str:
    """The environment variable of setting `name` (APP_MAX_ITERATIONS; APP_APPROVE)."""
    alias = definition(name).validation_alias
    spelled = alias.choices[-1] if isinstance(alias, AliasChoices) else name
    return f"{ENV_PREFIX}{spelled}".upper()
