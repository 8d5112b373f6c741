"""The approximate token count of a conversation, `count_tokens_approximately` exactly, without
counting the whole conversation again at every step: each message is counted once.

With its defaults the function adds a whole number per message (its characters / 4 rounded up,
plus 3, plus a fixed cost per image) and rounds the sum up, so the count of a list is the sum of
its messages' counts. A message is never changed in place (a changed message is a new object
with the same id), so a message object's count holds for as long as the object lives.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

# id(message) -> (a weak reference to it, its count); entries of dead messages are swept out when
# the map has doubled since the last sweep (no weakref callbacks: they could run inside the lock).
_counts: dict[int, tuple[weakref.ref, int]] = {}
_lock = threading.Lock()
MIN_SWEEP = 10_000
_sweep_at = MIN_SWEEP


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
    with _lock:
        _counts[id(message)] = (weakref.ref(message), count)
        if len(_counts) > _sweep_at:
            _sweep()
    return count


def _sweep() -> None:
    global _sweep_at
    for key in [key for key, (ref, _) in _counts.items() if ref() is None]:
        del _counts[key]
    _sweep_at = max(MIN_SWEEP, 2 * len(_counts))
