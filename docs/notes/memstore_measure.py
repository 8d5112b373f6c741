"""Recall and count at the fact limit (1000 facts a user, 4 users) in Waypoint's own store and in
foreign stores ranked by listing: `python docs/notes/memstore_measure.py [PG_URL PG_URL2]`."""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from langgraph.store.memory import InMemoryStore

import tools.memory.store as memory_module
from tools.memory import MemoryStore, memory_of

WORDS = [
    "river",
    "mountain",
    "colour",
    "food",
    "city",
    "friend",
    "music",
    "book",
    "sport",
    "tea",
    "coffee",
    "garden",
    "car",
    "train",
]
USERS = ("alice", "bob", "carol", "dave")


def facts(count: int) -> list[str]:
    pick = random.Random(7).choice
    return [
        f"The user's {pick(WORDS)} note {n}: likes {pick(WORDS)} and {pick(WORDS)} in {pick(WORDS)}"
        for n in range(count)
    ]


def median_ms(call: Callable[[], object], times: int = 30) -> float:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1000)
    return statistics.median(spent)


def measure(label: str, memory: MemoryStore) -> None:
    for user in USERS:
        for number, fact in enumerate(facts(1000)):
            memory.put("memories", user, f"{user}-{number}", fact)
    recall = median_ms(lambda: memory.recall("alice", "favourite colour tea", 5))
    count = median_ms(lambda: memory.count("memories", "alice"))
    print(f"{label:34s} recall {recall:7.2f} ms   count {count:7.2f} ms")


def main(urls: list[str]) -> None:
    memory_module.MAX_MEMORIES_PER_USER = 10_000
    with MemoryStore.open(Path(tempfile.mkdtemp()) / "agent.sqlite") as own:
        measure("Waypoint SQLite (FTS5 index)", own)
    measure("InMemoryStore, listed + BM25", memory_of(InMemoryStore()))
    if len(urls) == 2:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(urls[0]) as postgres:
            postgres.setup()
            measure("PostgresStore, listed + BM25", memory_of(postgres))
        with MemoryStore.open(urls[1]) as own:
            measure("Waypoint PostgreSQL (terms index)", own)


if __name__ == "__main__":
    main(sys.argv[1:])
