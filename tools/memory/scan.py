"""The ranking of long-term memory kept in another engine's store (LangGraph's server, Aegra): no
index of its own; a search lists the user's items of one kind from the store and ranks them with
the same terms and BM25 as Waypoint's own index (`tools.memory.index`)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langgraph.store.base import BaseStore, Item

from tools.memory.index import IndexRow, bm25
from tools.memory.text import index_terms

SCAN_PAGE = 1000
SCAN_CAP = 10_000  # a user's items of one kind read at most (the limits keep far fewer)
# Texts whose terms are kept: a user's facts and experiences (1000 + 220 at most) several times over.
TERMS_CACHED = 8192


def searchable_text(value: Mapping[str, Any]) -> str | None:
    """What an item is found by: its `search_text`, else its `text`; None for an item without
    text (one written through the store API in some other shape)."""
    text = value.get("search_text") or value.get("text")
    return text if isinstance(text, str) and text else None


def listed_items(store: BaseStore, kind: str, label: str) -> list[Item]:
    """Every item in the namespace (kind, label) exactly (not the namespaces below it)."""
    namespace = (kind, label)
    items: list[Item] = []
    while len(items) < SCAN_CAP:
        page = store.search(namespace, limit=SCAN_PAGE, offset=len(items))
        items += page
        if len(page) < SCAN_PAGE:
            break
    return [item for item in items if tuple(item.namespace) == namespace]


class ScanIndex:
    """A MemoryIndex over a store it does not own: writes leave nothing to update, a count and a
    search read the user's items of that kind from the store."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    def create(self, stored: Callable[[], Sequence[IndexRow]]) -> None:
        """Nothing to create: the store's items are the index."""

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Nothing to write: the item itself is read at search time."""

    def delete(self, rowids: Sequence[int]) -> None:
        """Nothing to delete: a deleted item is no longer listed."""

    def count(self, kind: str, label: str) -> int:
        return len(listed_items(self.store, kind, label))

    def search(
        self,
        kind: str,
        label: str,
        terms: Sequence[str],
        require_all: bool,
        limit: int,
        skip_prefix: str = "",
    ) -> list[tuple[str, float]]:
        """(key, score) of the best `limit` items, by BM25 over all the user's items of the kind
        (statistics as the PostgreSQL index keeps them: over the kind and user, skipped keys too)."""
        documents = {
            item.key: cached_terms(text)
            for item in listed_items(self.store, kind, label)
            if (text := searchable_text(item.value))
        }
        return rank(documents, terms, require_all, limit, skip_prefix)


@functools.lru_cache(maxsize=TERMS_CACHED)
def cached_terms(text: str) -> tuple[str, ...]:
    """`index_terms` of a text, computed once: a search lists the same items again and again."""
    return tuple(index_terms(text))


def rank(
    documents: Mapping[str, Sequence[str]],
    terms: Sequence[str],
    require_all: bool,
    limit: int,
    skip_prefix: str = "",
) -> list[tuple[str, float]]:
    """The BM25 ranking of `documents` (key → index terms) for the query `terms`: documents that
    hold any (or all) of them, best first, ties by key."""
    if not documents or not terms:
        return []
    holding = {key: set(doc) for key, doc in documents.items()}
    frequency = Counter(term for doc in holding.values() for term in terms if term in doc)
    average = sum(len(doc) for doc in documents.values()) / len(documents)
    wanted = set(terms)
    scored = [
        (key, bm25(documents[key], terms, frequency, len(documents), average))
        for key, doc in holding.items()
        if (wanted <= doc if require_all else wanted & doc)
        and not (skip_prefix and key.startswith(skip_prefix))
    ]
    return sorted(scored, key=lambda hit: (-hit[1], hit[0]))[:limit]
