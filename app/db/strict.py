"""What reading a stored checkpoint may hand back: allowlisted objects of the expected shape, or an
UnreadableCheckpointError. Anything else in the database was tampered with or damaged.

LangGraph's own strict mode is not enough: a blocked object (or an allowed one whose arguments do not
fit) comes back as its raw payload, a string or a dict, and `add_messages` turns such a value in the
`messages` channel into a user message. Here every such value is refused instead, at the saver, so
no caller ever sees it.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import ormsgpack
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from app.db import raw
from app.db.decoded import Decoded, digest, held_bytes
from app.db.raw import MESSAGE_CHANNELS
from app.db.unreadable import SHAPE_ERRORS, UnreadableCheckpointError

__all__ = ["SHAPE_ERRORS", "UnreadableCheckpointError"]  # with the serializer and the checks below
BUILD = {
    raw.EXT_CONSTRUCTOR_SINGLE_ARG: lambda cls, args: cls(args),
    raw.EXT_CONSTRUCTOR_POS_ARGS: lambda cls, args: cls(*args),
    raw.EXT_CONSTRUCTOR_KW_ARGS: lambda cls, args: cls(**args),
    raw.EXT_PYDANTIC_V1: lambda cls, args: cls(**args),
    raw.EXT_PYDANTIC_V2: lambda cls, args: cls(**args),
}


class StrictSerializer(jsonplus.JsonPlusSerializer):
    """LangGraph's serializer for writing; for reading, only LangGraph's safe types are rebuilt (the
    allowlist of app/db/raw.py), and a blocked or unbuildable object is an
    UnreadableCheckpointError, never its raw payload."""

    def __init__(self) -> None:
        super().__init__(allowed_msgpack_modules=None)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_ not in raw.LOADABLE_TYPES:
            raise UnreadableCheckpointError(f"unsupported serialisation type {str(type_)[:40]!r}")
        if type_ != "msgpack":
            return super().loads_typed(data)
        refusals: list[str] = []

        def hook(code: int, payload: bytes) -> Any:
            try:
                return _revive(code, payload, hook)
            except Exception as exc:  # ormsgpack replaces it with a bare ValueError: keep the why
                refusals.append(str(exc) if isinstance(exc, raw.Refused) else raw.named(exc))
                raise

        try:
            return ormsgpack.unpackb(blob, ext_hook=hook, option=raw.UNPACK_OPTIONS)
        except SHAPE_ERRORS as exc:
            raise UnreadableCheckpointError(refusals[0] if refusals else raw.named(exc)) from None


class Snapshots:
    """The values of the DeltaChannel snapshots read last, by their stored bytes.

    Every run of a turn loads the thread: the messages of its latest snapshot (LangGraph stores one
    every 100 message writes) and the writes since. Decoding the snapshot means building every
    message of the conversation again, the one cost of a turn that grows with the thread; the
    same bytes decode to the same messages, so they are decoded (and checked) once. A changed blob
    is other bytes, decoded afresh; every load gets its own list (messages are never changed in
    place: a changed message is a new one with the same id). Keyed by a digest of the bytes
    (app/db/decoded.digest), which are the whole conversation."""

    def __init__(self, size: int = 8) -> None:
        # by entries, and by what they hold (conversations of up to ~18,000 messages are kept)
        self._kept = Decoded(entries=size, max_bytes=256 * 1024 * 1024)

    def value(self, payload: bytes, decode: Callable[[], Any]) -> Any:
        key = digest(payload)
        found, value = self._kept.get(key)
        if not found:
            value = decode()
            self._kept.keep(key, value, len(key) + held_bytes(value))
        return copy.copy(value)


SNAPSHOTS = Snapshots()


class SharedMessages:
    """One message object for the same stored bytes, for as long as anything holds it.

    A conversation is stored again in every snapshot (one every 100 message writes) and each of
    its messages once more in its write; decoded separately, the snapshots and writes the caches
    keep held ~27 copies of a long thread's messages (measured: 10,700 message objects alive for
    a 400-message state). Here a message whose bytes were decoded before, and which is still
    alive, is that object again. Only messages with an id are shared: `add_messages` gives a
    message without one its id in place. Weak: what no one holds any more is not kept here.
    Keyed by a digest of the bytes and their constructor code (app/db/decoded.digest)."""

    def __init__(self) -> None:
        self._alive: weakref.WeakValueDictionary[bytes, BaseMessage] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def value(self, code: int, payload: bytes, build: Callable[[], Any]) -> Any:
        key = digest(payload, b"%d" % code)
        with self._lock:
            found = self._alive.get(key)
        if found is not None:
            return found
        value = build()
        if isinstance(value, BaseMessage) and isinstance(value.id, str):
            with self._lock:
                value = self._alive.setdefault(key, value)
        return value

    def __len__(self) -> int:
        return len(self._alive)


MESSAGES = SharedMessages()


def _revive(code: int, payload: bytes, hook: Any) -> Any:
    def unpacked() -> Any:
        return ormsgpack.unpackb(payload, ext_hook=hook, option=raw.UNPACK_OPTIONS)

    if code == raw.EXT_DELTA_SNAPSHOT:
        return _DeltaSnapshot(SNAPSHOTS.value(payload, unpacked))
    if code in raw.CONSTRUCTED:
        return MESSAGES.value(code, payload, lambda: _built(code, unpacked()))
    return _built(code, unpacked())


def _built(code: int, data: Any) -> Any:
    found = raw.stored_object(code, data)
    assert isinstance(found, raw.Stored)  # a snapshot's code was handled by _revive
    owner = getattr(importlib.import_module(found.module), found.name)
    if found.method is not None:
        return getattr(owner, found.method)(found.args)
    if (found.module, found.name) == ("langgraph.types", "Send"):
        return jsonplus._send_from_args(found.args)
    return BUILD[found.code](owner, found.args)


# --- the saver's reads ------------------------------------------------------------------------------


class CheckedReads:
    """Mixin for a LangGraph saver class: what `get_tuple`, `list` and `get_delta_channel_history`
    return has the shape LangGraph and Waypoint rely on, or they raise UnreadableCheckpointError
    naming the thread and checkpoint."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        with reading(config):
            # a mixin: the saver class it is mixed into has `get_tuple`
            return _checked_tuple(super().get_tuple(config))  # type: ignore[misc]

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # a mixin: the saver class it is mixed into has `list`
        items = super().list(config, filter=filter, before=before, limit=limit)  # type: ignore[misc]
        try:
            while True:
                with reading(config, "in history"):
                    item = next(items, None)
                    if item is None:
                        return
                    with reading(item.config):
                        checked = _checked(item)
                yield checked
        finally:
            items.close()  # its cursor, now: later the connection may be closed

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        with reading(config):
            # a mixin: the saver class it is mixed into has `get_delta_channel_history`
            history = super().get_delta_channel_history(config=config, channels=channels)  # type: ignore[misc]
            check_delta_history(history)
            return history


def check_delta_history(history: Mapping[str, DeltaChannelHistory], *, seeds: bool = True) -> None:
    """The messages of a DeltaChannel history are messages: its writes, and its seeds unless
    `seeds` is False (a reader that checked them when it decoded them)."""
    for channel, entry in history.items():
        if channel in MESSAGE_CHANNELS:
            if seeds and "seed" in entry:
                BUILT.messages(entry["seed"], f"the stored {channel}")
            for write in entry["writes"]:
                BUILT.messages(write[2], f"a write to {channel}")


@contextlib.contextmanager
def reading(config: RunnableConfig | None, default: str | None = None) -> Iterator[None]:
    configurable = (config or {}).get("configurable", {})
    thread_id, checkpoint_id = configurable.get("thread_id"), configurable.get("checkpoint_id")
    try:
        yield
    except UnreadableCheckpointError as exc:
        exc.thread_id = exc.thread_id or thread_id
        exc.checkpoint_id = exc.checkpoint_id or checkpoint_id or default
        raise
    except SHAPE_ERRORS as exc:
        raise UnreadableCheckpointError(
            raw.named(exc), thread_id, checkpoint_id or default
        ) from exc


BUILT = raw.Shapes(lambda m: isinstance(m, BaseMessage), _DeltaSnapshot)


def _checked_tuple(item: CheckpointTuple | None) -> CheckpointTuple | None:
    return None if item is None else _checked(item)


def _checked(item: CheckpointTuple) -> CheckpointTuple:
    BUILT.checkpoint(item.checkpoint)
    raw.require(isinstance(item.metadata, dict), "its metadata is not a mapping")
    for write in item.pending_writes or []:
        BUILT.write(write)
    return item
