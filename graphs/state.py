"""Graph state (checkpointed, JSON-like) and run context (injected per run, never checkpointed)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Final, Literal, NotRequired, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage
from langchain_core.tools import BaseTool
from langgraph.channels import DeltaChannel
from langgraph.graph import add_messages
from langgraph.graph.message import REMOVE_ALL_MESSAGES as REMOVE_ALL

# typing_extensions' TypedDict: pydantic (langgraph dev's schemas) refuses typing's before 3.12
from typing_extensions import TypedDict

from graphs import field_types
from graphs.message_ids import MessageIds
from graphs.run_settings import DEFAULTS, ApprovalPolicy
from graphs.shared.window import ContextWindow

ErrorKind = Literal["model_transient", "model_fatal", "tool", "context_overflow", "internal"]
TurnStatus = Literal[
    "answered", "failed", "max_iterations", "loop_detected", "budget_exhausted", "cancelled"
]
Budget = Literal["time", "tokens"]

# LangGraph's END, typed as the literal routers return (langgraph types its END as plain `str`).
END: Final = "__end__"


class LastError(TypedDict):
    """The failure the graph is currently handling."""

    kind: ErrorKind
    message: str
    retry_after: float | None


def last_error_kind(state: AgentState) -> ErrorKind | None:
    """The kind of the failure the graph is handling, or None."""
    error = state.get("last_error")
    return error["kind"] if error else None


# add_messages given two message lists returns one; langgraph types it over any message-like value.
_add_messages = cast(Callable[[list[AnyMessage], list[AnyMessage]], list[AnyMessage]], add_messages)


def merge_messages(current: list[AnyMessage], batches: Sequence[list[AnyMessage]]) -> list:
    """DeltaChannel reducer with `add_messages` semantics. Replaying a long chain of writes one
    batch at a time costs state size x batches, so the batches are merged in one call; a batch that
    removes or replaces a message added earlier in the same chain falls back to the exact fold.
    Appending new messages to a list this reducer returned costs the new messages only
    (graphs/message_ids.py), and a merge after a reset reads nothing the reset removes."""
    flat = [message for batch in batches for message in _as_list(batch)]
    # One call only merges new ids against `current`; ids repeated inside the chain need the fold.
    last_reset = max(
        (i for i, m in enumerate(flat) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL),
        default=-1,
    )
    ids = [getattr(m, "id", None) for m in flat[last_reset + 1 :]]
    if None in ids or len(set(ids)) != len(ids):
        return functools.reduce(_add_messages, batches, current)
    if last_reset < 0 and (appended := MERGED.appended(current, flat)) is not None:
        return appended
    # add_messages keeps nothing of `current`, or of the writes before the last reset
    base, new = ([], flat[last_reset:]) if last_reset >= 0 else (current or [], flat)
    try:
        return MERGED.record(_add_messages(base, new))
    except ValueError:
        return functools.reduce(_add_messages, batches, current)


MERGED = MessageIds()


def _as_list(batch: object) -> list:
    return list(batch) if isinstance(batch, list | tuple) else [batch]


class AgentState(TypedDict):
    """Checkpointed state of one thread. Counters are per turn and reset by the turn's input."""

    messages: Annotated[list[AnyMessage], DeltaChannel(merge_messages)]
    turn: NotRequired[int]
    iteration: NotRequired[int]
    retry_count: NotRequired[int]
    last_error: NotRequired[LastError | None]
    call_signatures: NotRequired[list[str]]
    status: NotRequired[TurnStatus | None]
    turn_started_at: NotRequired[float]
    tokens_used: NotRequired[int]
    budget_exhausted: NotRequired[Budget | None]
    strategy: NotRequired[str]  # the strategy that ran the last turn (graphs/strategies.py)
    # The id of the user message that began the current turn: the first node to run for a new user
    # message that no input began starts a turn (resets the counters above; graphs/shared/turns.py).
    turn_message_id: NotRequired[str | None]


@dataclass(frozen=True)
class AgentContext:
    """Run dependencies and limits, passed as `context=`; not part of the checkpoint."""

    model: BaseChatModel
    tools: Sequence[BaseTool] = ()
    system_prompt: str = ""
    # Per-turn material for the model (relevant past experience): a system section of its own just
    # before the user's current message, after the fixed prefix (graphs/shared/messages.for_model).
    turn_notes: str = ""
    # The limits, with their defaults from graphs/run_settings.py (app/service/context.py sets them)
    max_iterations: int = DEFAULTS.max_iterations
    max_retries: int = DEFAULTS.max_retries
    backoff_base: float = DEFAULTS.backoff_base
    backoff_cap: float = DEFAULTS.backoff_cap
    max_tool_result_chars: int = DEFAULTS.max_tool_result_chars
    max_retry_after: float = DEFAULTS.max_retry_after
    context_tokens: int | None = None
    # The model's context window (graphs/shared/window.py), shared by the runs of a process; with
    # `context_tokens_explicit` (APP_CONTEXT_TOKENS was set) they decide the messages' budget.
    window: ContextWindow | None = None
    context_tokens_explicit: bool = False
    keep_recent_turns: int = 1
    max_seconds: float | None = DEFAULTS.max_seconds
    max_tokens_per_turn: int | None = DEFAULTS.max_tokens_per_turn
    approval: ApprovalPolicy = "auto"
    # Tools whose every call needs approval (a replay of a strategy whose tools run in a subgraph).
    confirm_tools: frozenset[str] = frozenset()
    max_trials: int = DEFAULTS.max_trials
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.time, repr=False)

    @functools.cached_property
    def tools_by_name(self) -> dict[str, BaseTool]:
        return {t.name: t for t in self.tools}


def unreadable_reason(values: dict) -> str | None:
    """Why a loaded state cannot be trusted (graphs/field_types.py)."""
    return field_types.unreadable_reason(values, is_message=lambda m: isinstance(m, BaseMessage))


def turn_input(message: AnyMessage, turn: int, started_at: float | None = None) -> dict:
    """The input of a new user turn: the message plus every per-turn counter reset."""
    return {"messages": [message], **turn_resets(turn, message.id, started_at)}


def turn_resets(turn: int, message_id: str | None, started_at: float | None = None) -> dict:
    """Every per-turn counter reset for turn number `turn`, begun by message `message_id`."""
    return {
        "turn_started_at": time.time() if started_at is None else started_at,
        "tokens_used": 0,
        "budget_exhausted": None,
        "turn": turn,
        "turn_message_id": message_id,
        "iteration": 0,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": [],
        "status": None,
    }
