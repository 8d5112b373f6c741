"""Long-term memory as the store a graph runs with: `IndexedStore` is Waypoint's own MemoryStore
as a LangGraph BaseStore (what the CLI and serve compile their graphs with), and `memory_of` turns
whatever store a graph has (that one, or a server's) back into the memory operations."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Iterable
from typing import TypeGuard

from langgraph.store.base import BaseStore, Item, Op, PutOp, Result, SearchItem, SearchOp

from tools.memory.item import Kind
from tools.memory.store import MemoryStore, Writes

KINDS: tuple[Kind, ...] = ("memories", "experiences")
FILTERED_CAP = 10_000  # a filtered search ranks at most this many of the user's items

# What this process knows of its writes to each foreign store, while the store lives.
_writes: weakref.WeakKeyDictionary[BaseStore, Writes] = weakref.WeakKeyDictionary()
_making = threading.Lock()  # two tool calls at once share the same


def memory_namespace(namespace: tuple[str, ...]) -> TypeGuard[tuple[Kind, str]]:
    """Is this ("memories" | "experiences", user label): a namespace whose items are indexed?"""
    return len(namespace) == 2 and namespace[0] in KINDS


class IndexedStore(BaseStore):
    """LangGraph's store interface over a MemoryStore: a put or delete in ("memories" | "experiences",
    user) keeps the BM25 index in step, and a search there with a `query` is ranked by it (score =
    BM25, higher is better); every other operation is the underlying SqliteStore's or
    PostgresStore's, whose search ignores `query`."""

    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # the database calls block: a worker thread keeps the server's event loop free
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, PutOp) and memory_namespace(op.namespace):
            kind, label = op.namespace
            if op.value is None:
                self.memory.delete_keys(kind, label, [op.key])
            else:
                self.memory.put_value(kind, label, op.key, dict(op.value))
            return None
        if isinstance(op, SearchOp) and op.query and memory_namespace(op.namespace_prefix):
            return self._ranked(op)
        return self.memory.store.batch([op])[0]

    def _ranked(self, op: SearchOp) -> list[SearchItem]:
        kind, label = op.namespace_prefix
        wanted = op.limit + op.offset
        ranked = FILTERED_CAP if op.filter else wanted
        hits = self.memory.ranked(kind, label, op.query or "", ranked)
        if op.filter:  # the underlying store applies the filter; the ranking keeps its order
            listed = self.memory.store.search(
                op.namespace_prefix, filter=op.filter, limit=FILTERED_CAP
            )
            passing = {item.key for item in listed}
            hits = [(item, score) for item, score in hits if item.key in passing]
        return [_scored(item, score) for item, score in hits[op.offset : wanted]]


def _scored(item: Item, score: float) -> SearchItem:
    return SearchItem(
        namespace=tuple(item.namespace),
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def graph_store(memory: MemoryStore | BaseStore) -> BaseStore:
    """The store to compile a graph with: a MemoryStore's IndexedStore, or a store that already is
    one."""
    return memory if isinstance(memory, BaseStore) else IndexedStore(memory)


def memory_of(store: MemoryStore | BaseStore) -> MemoryStore:
    """The memory operations over the store a graph runs with: Waypoint's own MemoryStore behind an
    IndexedStore, else one over the foreign store (`MemoryStore.listing`) that shares what the
    process knows of its writes there: its compound writes are serialised, prune's counts carry
    over."""
    if isinstance(store, MemoryStore):
        return store
    if isinstance(store, IndexedStore):
        return store.memory
    with _making:
        try:
            writes = _writes.setdefault(store, Writes())
        except TypeError:  # a store that cannot be weakly referenced: on its own each time
            writes = Writes()
    return MemoryStore.listing(store, writes)
