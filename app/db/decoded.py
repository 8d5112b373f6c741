"""Values decoded from stored bytes, kept by those bytes: the same bytes decode (and pass the same
checks) to the same value, so a blob read again is not decoded again. Changed bytes are another
key, decoded and checked afresh."""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Collection, Hashable
from typing import Any

from langchain_core.messages import BaseMessage

# What a kept entry costs besides its value: its key (the stored bytes, held), the tuples around
# it and the map's slot.
ENTRY_BYTES = 256
# A decoded message's objects besides its text: its fields, their dicts, pydantic's bookkeeping
# (tracemalloc over 2,000 decoded message writes of a thread: ~1.3 KB each, with short texts).
MESSAGE_BYTES = 1280
TOOL_CALL_BYTES = 512


class Decoded:
    """A least-recently-used map from a blob's key (its bytes, with whatever else decoding
    depended on) to its decoded value, bounded by entries and by the entries' total size (what
    the caller says each one holds: `held_bytes`). An entry larger than a tenth of the size bound
    is not kept (it is decoded every time). An entry may belong to a group (a thread), whose
    entries no later read needs can be dropped together (`drop_group`)."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self.entries, self.max_bytes = entries, max_bytes
        self._values: OrderedDict[Hashable, tuple[Any, int, Hashable]] = OrderedDict()
        self._groups: dict[Hashable, set[Hashable]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[bool, Any]:
        """(True, the value kept for this key), or (False, None)."""
        with self._lock:
            found = self._values.get(key)
            if found is None:
                return False, None
            self._values.move_to_end(key)
            return True, found[0]

    def keep(self, key: Hashable, value: Any, size: int, group: Hashable = None) -> None:
        """Keep `value` for this key; `size` is what it holds in memory (what the bound counts)."""
        if size * 10 > self.max_bytes:
            return
        with self._lock:
            if key in self._values:
                return
            self._values[key] = (value, size, group)
            self._bytes += size
            if group is not None:
                self._groups.setdefault(group, set()).add(key)
            while len(self._values) > self.entries or self._bytes > self.max_bytes:
                self._drop(next(iter(self._values)))

    def drop_group(self, group: Hashable, but: Collection[Hashable] = ()) -> None:
        """Drop the entries kept for `group`, except those keyed in `but`."""
        with self._lock:
            for key in list(self._groups.get(group, ())):
                if key not in but:
                    self._drop(key)

    def _drop(self, key: Hashable) -> None:
        _, size, group = self._values.pop(key)
        self._bytes -= size
        members = self._groups.get(group)
        if members is not None:
            members.discard(key)
            if not members:
                del self._groups[group]

    def __len__(self) -> int:
        return len(self._values)


def digest(data: bytes, kind: bytes = b"") -> bytes:
    """A key for stored bytes (of one `kind`) that does not hold them: a 128-bit BLAKE2b digest.
    A snapshot's bytes are the whole conversation (~450 KB for 2,000 messages), kept in memory
    again as its key; a message's (with the tuple around them) were ~20 % of what it held."""
    return hashlib.blake2b(data, digest_size=16, person=kind).digest()


def held_bytes(value: Any) -> int:
    """About the memory `value` holds once decoded: what a cache of decoded values is bounded by
    (the stored bytes say little of it: a compressed message write is ~50 bytes, decoded ~1.3 KB).
    Shared objects are counted in full (an estimate from above)."""
    if isinstance(value, BaseMessage):
        text = value.content if isinstance(value.content, str) else str(value.content)
        calls = len(getattr(value, "tool_calls", None) or ())
        return MESSAGE_BYTES + len(text) + TOOL_CALL_BYTES * calls
    if isinstance(value, list | tuple):
        return sys.getsizeof(value) + sum(held_bytes(item) for item in value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(held_bytes(item) for item in value.values())
    return sys.getsizeof(value)
