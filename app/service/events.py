"""What a run streams, defined once: a closed union of event types (`Event`).

The service turns LangGraph's stream (`messages` tokens, `custom` events the nodes write, `updates`)
into these, adds its own (`Notice`, `TurnEnd`), and hands them to an `EventSink`: the terminal's
renderer, `--jsonl` and the server's Server-Sent Events all consume the same objects. `as_json` is
the one wire form (`{"event": <name>, ...}`) that `--jsonl` prints and SSE sends."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, Protocol, get_args

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from app.models.react.model import UNPARSED  # a ReAct reply taken as the answer without parsing
from graphs.shared.messages import RECORDED_TASK


@dataclass(frozen=True)
class Token:
    """A piece of a model's reply, as it arrives (`chunk` and LangGraph's `metadata` for clients of
    the LangGraph Server API; `namespace`: the subgraph it came from, () for the graph itself)."""

    node: str | None
    text: str
    message_id: str | None = None
    chunk: BaseMessage | None = field(default=None, repr=False, compare=False)
    metadata: dict = field(default_factory=dict, repr=False, compare=False)
    namespace: tuple[str, ...] = ()
    name: ClassVar[str] = "token"


@dataclass(frozen=True)
class MessageOut:
    """A whole message a node produced without streaming it (a tool's result, mostly)."""

    message: BaseMessage
    metadata: dict = field(default_factory=dict, repr=False, compare=False)
    namespace: tuple[str, ...] = ()
    name: ClassVar[str] = "message"


@dataclass(frozen=True)
class StateValues:
    """The whole state after a step; only for sinks that ask for it (`wants_values`)."""

    values: dict
    namespace: tuple[str, ...] = ()
    name: ClassVar[str] = "values"


@dataclass(frozen=True)
class ToolCallStarted:
    id: str
    tool: str
    args: dict
    name: ClassVar[str] = "tool_call"


@dataclass(frozen=True)
class ToolFinished:
    """A tool call's result. `content` is what the model reads; `user_message`, when set, is what
    the person is shown instead (an error worded for the model: "use list_files…")."""

    id: str
    tool: str
    status: str  # success | error
    content: str
    duration_ms: float
    user_message: str | None = None
    name: ClassVar[str] = "tool_result"

    @property
    def for_user(self) -> str:
        return self.user_message or self.content


@dataclass(frozen=True)
class Retry:
    attempt: int
    max_attempts: int
    wait: float
    kind: str
    reason: str
    name: ClassVar[str] = "retry"


@dataclass(frozen=True)
class Summarized:
    """Older turns were replaced with a summary to fit the model's context."""

    messages_replaced: int
    summary_chars: int
    reason: str
    window: int | None
    budget: int | None
    dropped_lines: int
    name: ClassVar[str] = "summarized"


StrategyKind = Literal["plan", "step_skipped", "trial", "verdict", "lesson", "route"]


@dataclass(frozen=True)
class StrategyNote:
    """A strategy's own step: a plan, a skipped step, an attempt, its verdict and lesson, a route."""

    kind: StrategyKind
    data: dict

    @property
    def name(self) -> str:
        return self.kind


@dataclass(frozen=True)
class NodeFailed:
    """A bug inside a node; the traceback is for --debug and the server log, not for clients."""

    node: str
    error: str
    traceback: str
    name: ClassVar[str] = "error"


@dataclass(frozen=True)
class NodeUpdate:
    """What a node wrote to the state (messages as message objects)."""

    node: str
    update: Any
    namespace: tuple[str, ...] = ()
    name: ClassVar[str] = "node"


@dataclass(frozen=True)
class GraphChunk:
    """An item of one of LangGraph's own stream modes (`debug`, `tasks`, `checkpoints`), passed
    through as LangGraph streamed it, only to sinks that ask for the mode (`graph_modes`)."""

    mode: str
    payload: Any
    namespace: tuple[str, ...] = ()
    name: ClassVar[str] = "graph"


@dataclass(frozen=True)
class Notice:
    """Something the application tells the user (not the model's words)."""

    text: str
    name: ClassVar[str] = "notice"


@dataclass(frozen=True)
class TurnEnd:
    thread_id: str
    turn: int
    status: str
    answer: str
    name: ClassVar[str] = "final"


Event = (
    Token
    | MessageOut
    | StateValues
    | ToolCallStarted
    | ToolFinished
    | Retry
    | Summarized
    | StrategyNote
    | NodeFailed
    | NodeUpdate
    | GraphChunk
    | Notice
    | TurnEnd
)
STRATEGY_KINDS: frozenset[str] = frozenset(get_args(StrategyKind))
# LangGraph's stream modes passed through as GraphChunk to the sinks that ask for them.
GRAPH_MODES = frozenset({"debug", "tasks", "checkpoints"})
# The `type`s of the custom events the graphs' nodes write (a test pins this against graphs/).
CUSTOM_TYPES = frozenset({"tool_call", "tool_result", "retry", "summarized", "error"}) | (
    STRATEGY_KINDS
)


class EventSink(Protocol):
    """Where a run's events go: the terminal, JSON lines, or a server's event stream. A sink with
    `wants_values = True` also gets the whole state after every step (StateValues), and one with
    `graph_modes` (a set of LangGraph's `debug`, `tasks`, `checkpoints`) those modes' items as
    GraphChunk."""

    def emit(self, event: Event) -> None: ...

    def partial_answer(self) -> str:
        """The answer text shown so far (kept when the turn is stopped)."""
        ...


def from_stream(mode: str, payload: Any, namespace: tuple[str, ...] = ()) -> list[Event]:
    """The events in one item of LangGraph's stream (`messages`, `custom`, `updates`, `values`,
    or one of GRAPH_MODES); `namespace` is the subgraph the item came from."""
    if mode == "messages":
        message, metadata = payload
        if isinstance(message, AIMessageChunk):
            text = message.content if isinstance(message.content, str) else ""
            node = metadata.get("langgraph_node")
            return [Token(node, text, message.id, message, metadata, namespace)]
        return (
            [MessageOut(message, metadata, namespace)] if isinstance(message, BaseMessage) else []
        )
    if mode == "custom":
        return [_custom(payload)] if isinstance(payload, dict) else []
    if mode == "updates":  # a node that wrote nothing has nothing to show
        return [
            NodeUpdate(node, update, namespace)
            for node, update in payload.items()
            if update and node != RECORDED_TASK  # shown by the node that ran it, as a tool card
        ]
    if mode == "values":
        return [StateValues(payload, namespace)] if isinstance(payload, dict) else []
    if mode in GRAPH_MODES:
        return [GraphChunk(mode, payload, namespace)]
    return []


def _custom(event: dict) -> Event:
    kind = event.get("type")
    data = {k: v for k, v in event.items() if k != "type"}
    if kind == "tool_call":
        return ToolCallStarted(data["id"], data["name"], data["args"])
    if kind == "tool_result":
        return ToolFinished(
            data["id"],
            data["name"],
            data["status"],
            str(data["content"]),
            data["duration_ms"],
            data.get("user_message"),
        )
    if kind == "retry":
        return Retry(**data)
    if kind == "summarized":
        return Summarized(**data)
    if kind == "error":
        return NodeFailed(**data)
    if kind in STRATEGY_KINDS:
        return StrategyNote(kind, data)
    raise ValueError(f"unknown stream event type {kind!r}; add it to app/service/events.py")


def as_json(event: Event, *, traceback: bool = False) -> dict:
    """The wire form of an event, for --jsonl and SSE. A node's traceback only with `traceback`."""
    if isinstance(event, StrategyNote):
        return {"event": event.kind, **event.data}
    if isinstance(event, Token):
        return {"event": "token", "node": event.node, "text": event.text}
    if isinstance(event, ToolCallStarted | ToolFinished):
        data = {f.name: getattr(event, f.name) for f in fields(event)}
        return {"event": event.name, "name": data.pop("tool"), **data}
    if isinstance(event, NodeUpdate):
        return {"event": "node", "node": event.node, "update": update_dict(event.update)}
    if isinstance(event, MessageOut):
        return {"event": "message", "message": message_dict(event.message)}
    if isinstance(event, StateValues):
        return {"event": "values", "values": update_dict(event.values)}
    data = {f.name: getattr(event, f.name) for f in fields(event)}
    if isinstance(event, NodeFailed) and not traceback:
        data.pop("traceback")
    return {"event": event.name, **data}


def message_dict(message: BaseMessage) -> dict:
    """A compact, JSON-safe view of a message for --jsonl, --stream updates and the API."""
    data: dict[str, Any] = {"type": message.type, "content": message.content}
    for key in ("name", "tool_call_id", "status"):
        if getattr(message, key, None):
            data[key] = getattr(message, key)
    if isinstance(message, AIMessage) and message.response_metadata.get(UNPARSED):
        data["unparsed"] = True
    if isinstance(message, AIMessage) and message.tool_calls:
        data["tool_calls"] = [
            {"name": c["name"], "args": c["args"], "id": c["id"]} for c in message.tool_calls
        ]
    return data


def update_dict(update: Any) -> Any:
    if not isinstance(update, dict):
        return update
    return {
        key: [message_dict(m) for m in value] if key == "messages" else value
        for key, value in update.items()
    }
