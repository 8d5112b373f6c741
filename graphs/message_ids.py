"""The ids of the message lists the messages reducer returned last, so that appending new messages
to one of them costs the new messages, not the whole conversation.

Every step of a turn merges its new messages into the thread's list, and `add_messages` looks each
one up among the ids of the whole list, which it builds afresh every call. A list the reducer
returned is kept here (a few at a time) with its ids, found again by its length and last message
and confirmed equal to the list it is asked about (element by element, identity first: a copy of
it is found too). A list is never changed in place: a change is a new list.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, RemoveMessage

KEPT = 8


class MessageIds:
    """Lists of messages, each with its ids (worked out when first needed)."""

    def __init__(self, size: int = KEPT) -> None:
        self.size = size
        self._lists: OrderedDict[tuple[int, int], tuple[list, set[str] | None]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, merged: list) -> list:
        """Keep `merged`, a list `add_messages` returned (every message plain, with an id)."""
        if merged:
            self._keep(merged, None)
        return merged

    def appended(self, current: Any, new: Sequence[Any]) -> list | None:
        """`current + new` when that is `add_messages(current, new)`: `current` is a kept list and
        every new message is a plain message whose id is in neither (the caller checked they are
        unique among themselves); None when that is not known."""
        if not isinstance(current, list) or not current or not all(map(_plain, new)):
            return None
        key = _key(current)
        with self._lock:
            found = self._lists.get(key)
            if found is None or not (found[0] is current or found[0] == current):
                return None
            ids = found[1] if found[1] is not None else {m.id for m in found[0]}
            self._lists[key] = (found[0], ids)
            self._lists.move_to_end(key)
        if any(m.id in ids for m in new):
            return None
        merged = current + list(new)
        self._keep(merged, ids | {m.id for m in new})
        return merged

    def _keep(self, merged: list, ids: set[str] | None) -> None:
        with self._lock:
            self._lists[_key(merged)] = (merged, ids)
            self._lists.move_to_end(_key(merged))
            while len(self._lists) > self.size:
                self._lists.popitem(last=False)


def _key(messages: list) -> tuple[int, int]:
    return len(messages), id(messages[-1])


def _plain(message: Any) -> bool:
    return (
        isinstance(message, BaseMessage)
        and not isinstance(message, BaseMessageChunk | RemoveMessage)
        and isinstance(message.id, str)
    )
