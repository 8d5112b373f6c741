"""Values decoded from stored bytes, kept by those bytes: the same bytes decode (and pass the same
checks) to the same value, so a blob read again is not decoded again. Changed bytes are another
key, decoded and checked afresh."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class Decoded:
    """A least-recently-used map from a blob's key (its bytes, with whatever else decoding
    depended on) to its decoded value, bounded by entries and by the blobs' total size. A blob
    larger than a tenth of the size bound is not kept (it is decoded every time)."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self.entries, self.max_bytes = entries, max_bytes
        self._values: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
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

    def keep(self, key: Hashable, value: Any, size: int) -> None:
        """Keep `value` for this key; `size` is the stored blob's length (what the bound counts)."""
        if size * 10 > self.max_bytes:
            return
        with self._lock:
            if key in self._values:
                return
            self._values[key] = (value, size)
            self._bytes += size
            while len(self._values) > self.entries or self._bytes > self.max_bytes:
                _, (_, dropped) = self._values.popitem(last=False)
                self._bytes -= dropped

    def __len__(self) -> int:
        return len(self._values)
