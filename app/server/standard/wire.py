"""LangGraph's wire shapes: states, threads, checkpoints and messages as JSON, and a run's input
read back. Messages travel as their pydantic dump (`type`, `content`, `id`, `tool_calls`, …)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langgraph.types import Interrupt, StateSnapshot

from app.errors import UsageError

MAX_INPUT_MESSAGES = 100
MAX_MESSAGE_ID_CHARS = 200


class MessageDumps:
    """The JSON of the messages dumped so far, by message object: a message is never changed in
    place, so its JSON holds while the object lives (kept here with it). The dumps are shared:
    whoever gets one only reads it (they are written to the wire as they are)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[BaseMessage, dict]] = {}

    def of(self, message: BaseMessage) -> dict:
        found = self._by_id.get(id(message))
        if found is None or found[0] is not message:
            found = self._by_id[id(message)] = (message, message.model_dump(mode="json"))
        return found[1]

    def kept_for(self, messages: Iterable[Any]) -> MessageDumps:
        """The dumps of `messages` only (a thread's next run needs no others)."""
        kept = MessageDumps()
        for message in messages:
            found = self._by_id.get(id(message))
            if found is not None and found[0] is message:
                kept._by_id[id(message)] = found
        return kept

    def __len__(self) -> int:
        return len(self._by_id)


def jsonable(value: Any, dumps: MessageDumps | None = None) -> Any:
    """`value` with messages and interrupts turned into JSON data (anything else unknown: text);
    with `dumps`, a message dumped there before is its JSON from then."""
    if isinstance(value, BaseMessage):
        return value.model_dump(mode="json") if dumps is None else dumps.of(value)
    if isinstance(value, Interrupt):
        return interrupt_json(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, dumps) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, dumps) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class LazyJson:
    """A state turned into JSON data (`jsonable`) only when first read: a run keeps its `values`
    events for a client that joins late, and most runs (`wait`) have none, so each step's whole
    state was turned into JSON for nobody (~3 % of serve's CPU at 8 clients). The state's dict and
    lists are copied now (the graph makes new ones at each step; this only makes sure), its
    messages are never changed in place."""

    def __init__(self, value: Any, dumps: MessageDumps | None = None) -> None:
        self._value: Any = _containers_copied(value)
        self._dumps = dumps
        self._data: Any = None
        self._done = False
        self._lock = threading.Lock()

    def data(self) -> Any:
        with self._lock:
            if not self._done:
                self._data, self._done = jsonable(self._value, self._dumps), True
                self._value = self._dumps = None
            return self._data


def as_data(value: Any) -> Any:
    """`value` as JSON data: a LazyJson's, else itself."""
    return value.data() if isinstance(value, LazyJson) else value


def _containers_copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _containers_copied(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return list(value)
    return value


def interrupt_json(interrupt: Interrupt) -> dict:
    return {"value": jsonable(interrupt.value), "id": interrupt.id}


def checkpoint_json(config: Mapping[str, Any] | None) -> dict | None:
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id") or not configurable.get("checkpoint_id"):
        return None
    return {
        "thread_id": configurable["thread_id"],
        "checkpoint_ns": configurable.get("checkpoint_ns") or "",
        "checkpoint_id": configurable["checkpoint_id"],
    }


def state_json(snapshot: StateSnapshot | None) -> dict:
    """A thread state as LangGraph's `get_state` returns it (an empty one for a thread with no
    turns yet)."""
    if snapshot is None:
        return {
            "values": {},
            "next": [],
            "tasks": [],
            "metadata": None,
            "created_at": None,
            "checkpoint": None,
            "parent_checkpoint": None,
            "interrupts": [],
            "checkpoint_id": None,
            "parent_checkpoint_id": None,
        }
    checkpoint = checkpoint_json(snapshot.config)
    parent = checkpoint_json(snapshot.parent_config)
    return {
        "values": jsonable(snapshot.values),
        "next": list(snapshot.next),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "path": jsonable(task.path),
                "error": str(task.error) if task.error else None,
                "interrupts": [interrupt_json(i) for i in task.interrupts],
                "checkpoint": None,
                "state": None,
                "result": jsonable(getattr(task, "result", None)),
            }
            for task in snapshot.tasks
        ],
        "metadata": jsonable(snapshot.metadata),
        "created_at": snapshot.created_at,
        "checkpoint": checkpoint,
        "parent_checkpoint": parent,
        "interrupts": [interrupt_json(i) for i in snapshot.interrupts],
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def task_interrupts(snapshot: StateSnapshot | None) -> dict[str, list[dict]]:
    """A thread's pending interrupts by task id (the `interrupts` of a thread)."""
    if snapshot is None:
        return {}
    return {
        task.id: [interrupt_json(i) for i in task.interrupts]
        for task in snapshot.tasks
        if task.interrupts
    }


def user_text(run_input: Any) -> str:
    """The user's message of a run's input: `{"messages": [...]}` whose last message is the
    user's (a dict with role/type and content, or plain text)."""
    last = _last_user_message(run_input)
    if isinstance(last.content, str):
        return last.content
    texts = [b.get("text", "") for b in last.content if isinstance(b, dict)]
    return "".join(t for t in texts if isinstance(t, str))


def user_message_id(run_input: Any) -> str | None:
    """The id the client gave the user's message, kept so that a client sending the whole
    conversation again (RemoteGraph as a subgraph) does not duplicate it."""
    message_id = _last_user_message(run_input).id
    if message_id is not None and not 0 < len(message_id) <= MAX_MESSAGE_ID_CHARS:
        raise UsageError(f"a message id has 1 to {MAX_MESSAGE_ID_CHARS} characters")
    return message_id


def _last_user_message(run_input: Any) -> HumanMessage:
    if not isinstance(run_input, dict) or not isinstance(run_input.get("messages"), list):
        raise UsageError('the input must be {"messages": [{"role": "user", "content": "..."}]}')
    messages = run_input["messages"]
    if not messages or len(messages) > MAX_INPUT_MESSAGES:
        raise UsageError(f"send 1 to {MAX_INPUT_MESSAGES} messages in input.messages")
    try:
        last = convert_to_messages(messages[-1:])[0]
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise UsageError(f"input.messages: {exc}") from None
    if not isinstance(last, HumanMessage):
        raise UsageError("the last message of input.messages must be the user's (role user)")
    return last


def state_values(values: Any) -> dict | None:
    """A state update's values from JSON: messages become message objects."""
    if values is None:
        return None
    if not isinstance(values, dict):
        raise UsageError('values must be an object of state fields, e.g. {"messages": [...]}')
    if "messages" not in values:
        return values
    messages = values["messages"]
    try:
        converted = convert_to_messages(messages if isinstance(messages, list) else [messages])
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise UsageError(f"values.messages: {exc}") from None
    return {**values, "messages": converted}
