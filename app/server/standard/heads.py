"""The head each recent run on this server left on its thread, so the thread's next run here starts
from it instead of loading it again (one read of the head's id checks it is still the head)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from langgraph.types import StateSnapshot

# Threads whose last head this server keeps: the recently run ones (8 clients use 8); each head
# refers to its thread's messages, which the checkpointer's decoded caches hold anyway
MAX_KNOWN_HEADS = 32


class KnownHeads:
    """The last head of the threads run here most recently, by thread and graph. A run takes its
    thread's head (no other run has it meanwhile) and keeps the head it left."""

    def __init__(self, most: int = MAX_KNOWN_HEADS) -> None:
        self.most = most
        self._heads: OrderedDict[tuple[str, str], StateSnapshot] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, thread_id: str, strategy: str) -> StateSnapshot | None:
        with self._lock:
            return self._heads.pop((thread_id, strategy), None)

    def keep(self, thread_id: str, strategy: str, head: StateSnapshot) -> None:
        with self._lock:
            self._heads[(thread_id, strategy)] = head
            self._heads.move_to_end((thread_id, strategy))
            while len(self._heads) > self.most:
                self._heads.popitem(last=False)

    def forget(self, thread_id: str) -> None:
        """The thread was deleted: none of its heads is kept."""
        with self._lock:
            for key in [key for key in self._heads if key[0] == thread_id]:
                del self._heads[key]

    def __len__(self) -> int:
        return len(self._heads)
