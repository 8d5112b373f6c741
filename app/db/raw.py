"""Stored blobs decoded as data, without LangGraph's loading code or LangChain: the allowlist every
read applies (what the strict serializer rebuilds, app/db/strict.py, is what this lets through), and
a decoder that hands back an allowlisted object as it is stored instead of building it.

`history` and `threads list` read through this: they need a few channel values and the names of
tool calls, and importing LangChain to build messages would cost them most of their time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack  # the allowlist alone: no imports

from app.db.compressed import inflated
from app.db.unreadable import SHAPE_ERRORS, UnreadableCheckpointError

# What `JsonPlusSerializer.dumps_typed` writes; "pickle" and the legacy "json" reviver never load.
LOADABLE_TYPES = frozenset({"msgpack", "null", "bytes", "bytearray"})
# Channels that hold messages: add_messages would turn a stray string or dict there into a message.
MESSAGE_CHANNELS = frozenset({"messages"})
# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus; a test pins them).
EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_CONSTRUCTOR_POS_ARGS = 1
EXT_CONSTRUCTOR_KW_ARGS = 2
EXT_METHOD_SINGLE_ARG = 3
EXT_PYDANTIC_V1 = 4
EXT_PYDANTIC_V2 = 5
EXT_DELTA_SNAPSHOT = 7
CONSTRUCTED = frozenset(
    {
        EXT_CONSTRUCTOR_SINGLE_ARG,
        EXT_CONSTRUCTOR_POS_ARGS,
        EXT_CONSTRUCTOR_KW_ARGS,
        EXT_PYDANTIC_V1,
        EXT_PYDANTIC_V2,
    }
)
UNPACK_OPTIONS = ormsgpack.OPT_NON_STR_KEYS


class Refused(Exception):
    """An object the allowlist does not let a checkpoint rebuild."""


@dataclass(frozen=True)
class Stored:
    """An allowlisted object as it is stored: the class (and method) that would build it, from
    `args`. Messages are `Stored` objects whose `args` are the message's fields."""

    code: int
    module: str
    name: str
    args: Any
    method: str | None = None

    @property
    def fields(self) -> dict:
        return self.args if isinstance(self.args, dict) else {}


@dataclass(frozen=True)
class Snapshot:
    """A DeltaChannel's full value, stored every so many writes (LangGraph's `_DeltaSnapshot`)."""

    value: Any


def stored_object(code: int, data: Any) -> Stored | Snapshot:
    """What a msgpack extension holds, if the allowlist lets a checkpoint rebuild it; else Refused."""
    if code == EXT_DELTA_SNAPSHOT:
        return Snapshot(data)
    if not isinstance(data, list | tuple) or len(data) < 3:
        raise Refused(f"a msgpack extension {code} of the wrong shape")
    module, name, args = data[0], data[1], data[2]
    if code == EXT_METHOD_SINGLE_ARG and len(data) > 3:
        if (module, name, data[3]) not in lg_msgpack.SAFE_MSGPACK_METHODS:
            raise Refused(f"the call {module}.{name}.{data[3]} is not allowed")
        return Stored(code, module, name, args, data[3])
    if code not in CONSTRUCTED:
        raise Refused(f"an unknown msgpack extension {code}")
    if (module, name) not in lg_msgpack.SAFE_MSGPACK_TYPES:
        raise Refused(f"the type {str(module)[:60]}.{str(name)[:60]} is not allowed")
    return Stored(code, module, name, args)


def decode(type_: str, blob: bytes) -> Any:
    """A stored blob as data (allowlisted objects as `Stored`, snapshots as `Snapshot`), or an
    UnreadableCheckpointError saying why it cannot be trusted."""
    type_, blob = inflated(type_, blob)
    if type_ not in LOADABLE_TYPES:
        raise UnreadableCheckpointError(f"unsupported serialisation type {str(type_)[:40]!r}")
    if type_ == "null":
        return None
    if type_ != "msgpack":
        return bytes(blob)
    refusals: list[str] = []

    def hook(code: int, payload: bytes) -> Any:
        try:
            return stored_object(
                code, ormsgpack.unpackb(payload, ext_hook=hook, option=UNPACK_OPTIONS)
            )
        except Exception as exc:  # ormsgpack replaces it with a bare ValueError: keep the why
            refusals.append(str(exc) if isinstance(exc, Refused) else named(exc))
            raise

    try:
        return ormsgpack.unpackb(blob, ext_hook=hook, option=UNPACK_OPTIONS)
    except SHAPE_ERRORS as exc:
        raise UnreadableCheckpointError(refusals[0] if refusals else named(exc)) from None


def named(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --- the shape of what was read ---------------------------------------------------------------------


def is_stored_message(value: Any) -> bool:
    """A message as stored: an allowlisted LangChain message class (every one is a BaseMessage)
    with its fields, whose content is text or a list of blocks."""
    return (
        isinstance(value, Stored)
        and value.method is None
        and str(value.module).startswith("langchain_core.messages.")
        and isinstance(value.args, dict)
        and isinstance(value.args.get("content"), str | list)
    )


class HoldsValue(Protocol):
    """A snapshot: a DeltaChannel's whole value (this module's Snapshot or LangGraph's own)."""

    @property
    def value(self) -> Any: ...


@dataclass(frozen=True)
class Shapes:
    """The checks every read applies to a checkpoint and its writes, for built objects (the strict
    serializer's, app/db/strict.py) or stored ones (`STORED`): what a message and a snapshot are."""

    is_message: Callable[[Any], bool]
    snapshot: type[HoldsValue]

    def checkpoint(self, checkpoint: Any) -> None:
        require(isinstance(checkpoint, dict), "it is not a checkpoint")
        require(isinstance(checkpoint.get("id"), str), "it has no id")
        for key in ("channel_values", "channel_versions", "versions_seen"):
            require(isinstance(checkpoint.get(key), dict), f"its {key} is not a mapping")
        require(
            all(is_version(v) for v in checkpoint["channel_versions"].values()),
            "its channel versions are not versions",
        )
        require(
            all(
                isinstance(seen, dict) and all(is_version(v) for v in seen.values())
                for seen in checkpoint["versions_seen"].values()
            ),
            "its versions seen are not versions",
        )
        updated = checkpoint.get("updated_channels")
        require(
            updated is None
            or (isinstance(updated, list) and all(isinstance(c, str) for c in updated)),
            "its updated channels are not names",
        )
        for channel in MESSAGE_CHANNELS & checkpoint["channel_values"].keys():
            self.messages(checkpoint["channel_values"][channel], f"the stored {channel}")

    def write(self, write: Any) -> None:
        """A pending write: (task id, channel, value)."""
        require(
            isinstance(write, tuple | list)
            and len(write) == 3
            and isinstance(write[0], str)
            and isinstance(write[1], str),
            "a pending write is not a write",
        )
        if write[1] in MESSAGE_CHANNELS:
            self.messages(write[2], f"a write to {write[1]}")

    def messages(self, value: Any, what: str) -> None:
        if isinstance(value, self.snapshot):
            value = value.value
        for item in value if isinstance(value, list | tuple) else [value]:
            require(self.is_message(item), f"{what} holds a {type(item).__name__}, not a message")


STORED = Shapes(is_stored_message, Snapshot)


def is_version(value: Any) -> bool:
    """A channel version: a number, or the savers' "<number>.<random>" string (they parse the
    number to make the next version)."""
    if isinstance(value, str):
        number = value.split(".", 1)[0]
        return number.isascii() and number.isdigit()
    return isinstance(value, int | float) and not isinstance(value, bool)


def require(condition: bool, reason: str) -> None:
    if not condition:
        raise UnreadableCheckpointError(reason)
