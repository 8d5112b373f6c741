"""The approximate token count of a conversation, `count_tokens_approximately` exactly, without
counting the whole conversation again at every step: each message is counted once.

With its defaults the function adds a whole number per message (its characters / 4 rounded up,
plus 3, plus a fixed cost per image) and rounds the sum up, so the count of a list is the sum of
its messages' counts. A message is never changed in place (a changed message is a new object
with the same id), so a message object's count holds for as long as the object lives.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from functools import partial
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

# id(message) -> (a weak reference to it, its count). An entry is dropped when its message dies (the
# reference's callback), so a long-lived server holds the counts of live messages only (a sweep at
# 10,000 entries kept ~20,000 dead ones, 1.5 MB, in serve after 2,000 runs).
_counts: dict[int, tuple[weakref.ref, int]] = {}


def _forget(key: int, ref: weakref.ref) -> None:
    # No lock: the callback runs in whichever thread drops the message, maybe inside a count. The
    # message's id is not reused before its callbacks ran, so only a replaced entry is not ours.
    entry = _counts.get(key)
    if entry is not None and entry[0] is ref:
        _counts.pop(key, None)


def message_tokens(messages: Iterable[Any]) -> int:
    """`count_tokens_approximately(list(messages))`, from each message's own count."""
    total = 0
    for message in messages:
        found = _counts.get(id(message))  # tokens_of, inlined for the kept counts
        total += found[1] if found is not None and found[0]() is message else tokens_of(message)
    return total


def tokens_of(message: Any) -> int:
    """One message's count, kept while the message object lives (anything that is not a message
    object, a dict or a tuple, is converted anew each time and counted uncached)."""
    if not isinstance(message, BaseMessage):
        return count_tokens_approximately([message])
    found = _counts.get(id(message))
    if found is not None and found[0]() is message:
        return found[1]
    count = count_tokens_approximately([message])
    key = id(message)
    _counts[key] = (weakref.ref(message, partial(_forget, key)), count)
    return count
