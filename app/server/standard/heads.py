"""The head each recent run on this server left on its thread, with its messages' JSON, so the
thread's next run here starts from it instead of loading it again (one read of the head's id checks
it is still the head) and dumps only the messages it adds."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

from langgraph.types import StateSnapshot

from app.server.standard.wire import MessageDumps

# Threads whose last head this server keeps: the recently run ones (8 clients use 8). A head refers
# to its thread's messages, which the checkpointer's decoded caches hold while the thread is used
MAX_KNOWN_HEADS = 16
# The newest messages of a head whose JSON is kept: a run on a longer thread dumps the older ones
# again, as before. All of them grew serve's RSS after 1,000 runs on one thread 1.08x -> 1.115x
MAX_KEPT_DUMPS = 200


class KnownHead(NamedTuple):
    head: StateSnapshot
    dumps: MessageDumps  # the JSON of the head's messages (dumped by the run that left it)


class KnownHeads:
    """The last head of the threads run here most recently, by thread and graph. A run takes its
    thread's head (no other run has it meanwhile) and keeps the head it left."""

    def __init__(self, most: int = MAX_KNOWN_HEADS) -> None:
        self.most = most
        self._heads: OrderedDict[tuple[str, str], KnownHead] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, thread_id: str, strategy: str) -> KnownHead | None:
        with self._lock:
            return self._heads.pop((thread_id, strategy), None)

    def keep(self, thread_id: str, strategy: str, head: StateSnapshot, dumps: MessageDumps) -> None:
        """Keep `head` and the dumps of its newest messages (the others are not needed)."""
        messages = head.values.get("messages") if isinstance(head.values, dict) else None
        known = KnownHead(head, dumps.kept_for((messages or [])[-MAX_KEPT_DUMPS:]))
        with self._lock:
            self._heads[(thread_id, strategy)] = known
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
