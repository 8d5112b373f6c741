"""MemoryStore: per-user facts and experiences in LangGraph's SqliteStore or PostgresStore, ranked
by BM25 over this package's own index (`tools.memory.index`: the FTS5 table `memory_fts`, or
`memory_terms` in PostgreSQL), kept in the same database; or in another engine's store, ranked by
the same BM25 over the items listed from it (`MemoryStore.listing`, `tools.memory.scan`).

Invariant: an index row is written before its item and deleted after it, so every stored item is
searchable; a row orphaned by a crash in between is harmless, since results are read from the store.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, PutOp

from tools.errors import ToolInputError, ToolLimitError
from tools.memory.connection import connect, setup_sqlite_store, sqlite_store_class
from tools.memory.index import Fts5Index, IndexRow, MemoryIndex, PostgresTermIndex
from tools.memory.item import Kind, MemoryItem, memory_item, user_label, utc_now
from tools.memory.scan import ScanIndex, searchable_text
from tools.memory.text import MAX_INDEX_CHARS, clean_text, fact_key, index_terms, query_terms

POSTGRES_URL = ("postgresql://", "postgres://")

MAX_FACT_CHARS = 500
MAX_MEMORIES_PER_USER = 1000

_LIST_CAP = 10_000
_PAGE = 1000


@dataclass
class Writes:
    """What a process knows of its own writes to one store."""

    # Serialises compound writes (check, index, put) within this process; across processes
    # identical facts map to identical keys and rowids, so racing writers converge.
    lock: threading.RLock = field(default_factory=threading.RLock)
    # By (kind, user label): how many items `prune` last counted (less what it deleted) and how
    # many this process wrote since.
    counts: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)


def _rowid(kind: str, label: str, key: str) -> int:
    digest = hashlib.sha256(f"{kind}\x00{label}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # a positive 63-bit rowid, one per item


class MemoryStore:
    """Per-user facts and experiences: items in a SqliteStore under ``(kind, user)``, searchable
    through ``self.index``. Safe to share between threads (one connection, serialised)."""

    def __init__(self, connection: Any) -> None:
        if isinstance(connection, sqlite3.Connection):
            if connection.isolation_level is not None:
                raise ValueError(
                    "MemoryStore needs an autocommit connection (isolation_level=None)"
                )
            store: Any = sqlite_store_class()(connection)
            setup_sqlite_store(store)
            self._begin(store, Fts5Index(connection, store.lock))
            self._create_index()
        else:  # a psycopg connection (autocommit, dict rows), as PostgresStore requires
            from langgraph.store.postgres import PostgresStore

            store = PostgresStore(connection)
            self._begin(store, PostgresTermIndex(connection, store.lock))
            # the opener calls `migrate`, once per process and one process at a time

    @classmethod
    def listing(cls, store: BaseStore, writes: Writes | None = None) -> MemoryStore:
        """Long-term memory in another engine's store (LangGraph's server, Aegra): items are read
        and written there as they are here, and a search ranks the user's items listed from it
        (`tools.memory.scan`: no index beside a store Waypoint does not own). `writes`: what this
        process's other MemoryStores over the same store know of their writes."""
        memory = cls.__new__(cls)
        memory._begin(store, ScanIndex(store), writes)
        return memory

    def _begin(self, store: BaseStore, index: MemoryIndex, writes: Writes | None = None) -> None:
        self.store: Any = store
        self.index = index
        writes = writes or Writes()
        self._writing, self._last_count = writes.lock, writes.counts

    def migrate(self) -> None:
        """Create or upgrade the store's tables and the ranking index (PostgreSQL)."""
        self.store.setup()
        self._create_index()

    def _create_index(self) -> None:
        self.index.create(self._stored_rows)

    @classmethod
    @contextlib.contextmanager
    def open(cls, path: Path | str, busy_timeout: float = 5.0) -> Iterator[MemoryStore]:
        """A MemoryStore on its own connection to ``path`` (typically the checkpoint database),
        or to the PostgreSQL database of a postgresql:// URL."""
        if isinstance(path, str) and path.startswith(POSTGRES_URL):
            import psycopg
            from psycopg.rows import dict_row

            connection: Any = psycopg.connect(
                path, autocommit=True, prepare_threshold=0, row_factory=dict_row
            )
        else:
            connection = connect(Path(path), busy_timeout)
        try:
            memory = cls(connection)
            if not isinstance(connection, sqlite3.Connection):
                memory.migrate()  # one caller at a time; app.service.memory's opener serialises processes
            yield memory
        finally:
            connection.close()

    # Facts ("memories") -------------------------------------------------------------------------

    def remember(self, user: str, text: str) -> MemoryItem:
        """Save a fact for ``user``; an identical fact already saved is returned with existing=True."""
        fact = clean_text(text)
        if not fact:
            raise ToolInputError(
                "the fact is empty; give one self-contained fact, e.g. "
                "'The user's favourite colour is teal'"
            )
        if len(fact) > MAX_FACT_CHARS:
            raise ToolLimitError(
                f"the fact is {len(fact)} characters, over the {MAX_FACT_CHARS}-character limit; "
                "nothing was saved; save one short fact per call"
            )
        key = fact_key(fact)
        with self._writing:
            found = self.get("memories", user, key)
            if found is not None:
                self._index("memories", user_label(user), key, found.text)  # repairs a lost row
                return replace(found, existing=True)
            if self.count("memories", user) >= MAX_MEMORIES_PER_USER:
                raise ToolLimitError(
                    f"long-term memory already holds {MAX_MEMORIES_PER_USER} facts for this user; "
                    "nothing was saved; tell the user to remove old ones with "
                    "`waypoint memory forget`",
                    user_message=f"long-term memory already holds {MAX_MEMORIES_PER_USER} facts; "
                    "nothing was saved; list them with: waypoint memory list",
                )
            value = self.put("memories", user, key, fact)
            stored = self.get("memories", user, key)
        # None: deleted by another process in the meantime; what was saved is still the answer
        return stored or memory_item(
            Item(
                value=value,
                key=key,
                namespace=("memories", user_label(user)),
                created_at=utc_now(),
                updated_at=utc_now(),
            )
        )

    def recall(self, user: str, query: str, limit: int = 5) -> list[MemoryItem]:
        """The facts of ``user`` most relevant to ``query``, best first (BM25)."""
        return self.search("memories", user, query, limit)

    def forget(self, user: str, key_or_query: str, *, kind: Kind = "memories") -> int:
        """Delete the item with this key, else every item containing all the query's words;
        returns how many were deleted."""
        return self.delete(
            kind, user, [item.key for item in self.matching(user, key_or_query, kind)]
        )

    def matching(self, user: str, key_or_query: str, kind: Kind = "memories") -> list[MemoryItem]:
        """What ``forget`` would delete: the item with this exact key, else the items containing
        every word of the query (all, not any: forgetting must not sweep up loosely related facts)."""
        if key_or_query.strip():
            by_key = self.get(kind, user, key_or_query.strip())
            if by_key is not None:
                return [by_key]
        return self.search(
            kind, user, key_or_query, _LIST_CAP, require_all=True, keep_stopwords_if_alone=False
        )

    # Any kind -----------------------------------------------------------------------------------

    def put(
        self,
        kind: Kind,
        user: str,
        key: str,
        text: str,
        *,
        search_text: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Store (or replace) an item whose ``text`` is shown and whose ``search_text`` (default:
        the text) is what searches match; returns the value stored (`get` reads the item back)."""
        value = {"text": text, "saved_at": time.time(), **fields}
        if search_text is not None:
            value["search_text"] = search_text[:MAX_INDEX_CHARS]
        self.put_value(kind, user_label(user), key, value)
        return value

    def put_value(self, kind: Kind, label: str, key: str, value: dict[str, Any]) -> None:
        """Store `value` as it is under (kind, label), indexed by its search text or text (an item
        without text is stored unindexed)."""
        with self._writing:
            text = searchable_text(value)
            if text is None:
                self.index.delete([_rowid(kind, label, key)])
            else:
                self._index(kind, label, key, text)
            self.store.put((kind, label), key, value)
            if (kind, label) in self._last_count:
                counted, written = self._last_count[kind, label]
                self._last_count[kind, label] = (counted, written + 1)

    def get(self, kind: Kind, user: str, key: str) -> MemoryItem | None:
        item = self.store.get((kind, user_label(user)), key)
        return memory_item(item) if item is not None else None

    def search(
        self,
        kind: Kind,
        user: str,
        query: str,
        limit: int = 5,
        *,
        require_all: bool = False,
        keep_stopwords_if_alone: bool = True,
        skip_prefix: str = "",
    ) -> list[MemoryItem]:
        """Items of ``user`` matching any (or all) of the query's terms, best first; with
        ``skip_prefix``, none whose key starts with it."""
        return [
            replace(memory_item(item), score=score)
            for item, score in self.ranked(
                kind,
                user_label(user),
                query,
                limit,
                require_all=require_all,
                keep_stopwords_if_alone=keep_stopwords_if_alone,
                skip_prefix=skip_prefix,
            )
        ]

    def ranked(
        self,
        kind: str,
        label: str,
        query: str,
        limit: int,
        *,
        require_all: bool = False,
        keep_stopwords_if_alone: bool = True,
        skip_prefix: str = "",
    ) -> builtins.list[tuple[Item, float]]:
        """`search` by user label: the stored items with their BM25 scores, best first."""
        terms = query_terms(query, keep_stopwords_if_alone=keep_stopwords_if_alone)
        if not terms or limit < 1:
            return []
        # a few spare for rows orphaned by a crash
        scores = dict(self.index.search(kind, label, terms, require_all, limit + 8, skip_prefix))
        keys = builtins.list(scores)
        hits: builtins.list[tuple[Item, float]] = []
        while keys and len(hits) < limit:  # the spare rows' items are read only if one is missing
            wanted, keys = keys[: limit - len(hits)], keys[limit - len(hits) :]
            found = self.store.batch([GetOp((kind, label), key) for key in wanted])
            hits += [(item, scores[item.key]) for item in found if item is not None]
        return hits

    def count(self, kind: Kind, user: str) -> int:
        return self.index.count(kind, user_label(user))

    def delete(self, kind: Kind, user: str, keys: Iterable[str]) -> int:
        """Delete these items (missing keys are ignored); returns how many existed."""
        return self.delete_keys(kind, user_label(user), keys)

    def delete_keys(self, kind: str, label: str, keys: Iterable[str]) -> int:
        """`delete` by user label."""
        keys = builtins.list(dict.fromkeys(keys))
        if not keys:
            return 0
        with self._writing:
            existing = [i for i in self.store.batch([GetOp((kind, label), k) for k in keys]) if i]
            self.store.batch([PutOp((kind, label), key, None) for key in keys])
            self.index.delete([_rowid(kind, label, key) for key in keys])
        return len(existing)

    def prune(self, kind: Kind, user: str, keep: int, slack: int = 0) -> int:
        """Delete all but the ``keep`` newest items once there are more than ``keep + slack``;
        returns how many were deleted. Counting is a query and listing every item of the user
        costs as much as there are, so with a slack a process counts on its first call for the
        user, once its own writes since its last count could have passed ``keep + slack``, and at
        least once every ``slack`` writes: alone it prunes exactly when an exact count would, and
        with P processes writing for one user, the user holds at most ``keep + P × slack`` items."""
        label = user_label(user)
        with self._writing:
            last = self._last_count.get((kind, label))
            if slack and last is not None:
                counted, written = last
                if written < slack and counted + written <= keep + slack:
                    return 0
            count = self.count(kind, user)
            deleted = 0
            if count > keep + slack:
                stale = [item.key for item in self.list(user, kind=kind)[keep:]]
                deleted = self.delete(kind, user, stale)
            self._last_count[kind, label] = (count - deleted, 0)
        return deleted

    def _stored_rows(self) -> builtins.list[IndexRow]:
        """The index rows of every stored memory and experience."""
        rows = []
        for kind in ("memories", "experiences"):
            offset = 0
            while page := self.store.search((kind,), limit=_PAGE, offset=offset):
                for item in page:
                    text = searchable_text(item.value)
                    if len(item.namespace) == 2 and text is not None:
                        rows.append(_index_row(kind, item.namespace[1], item.key, text))
                offset += len(page)
        return rows

    def _index(self, kind: Kind, label: str, key: str, text: str) -> None:
        self.index.upsert([_index_row(kind, label, key, text)])

    # Defined last: inside the class body, `list` names this method from here on.
    def list(self, user: str, *, kind: Kind = "memories") -> builtins.list[MemoryItem]:
        """Every item of ``user``, newest first."""
        namespace = (kind, user_label(user))
        items = [
            memory_item(item)
            for item in self.store.search(namespace, limit=_LIST_CAP)
            if item.namespace == namespace
        ]
        return sorted(items, key=lambda i: (i.saved_at, i.created_at), reverse=True)


def _index_row(kind: str, label: str, key: str, text: str) -> tuple[int, str, str, str, str]:
    return (_rowid(kind, label, key), " ".join(index_terms(text)), kind, label, key)
