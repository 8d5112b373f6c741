"""The search index of long-term memory, one per backend: an FTS5 table (`memory_fts`) in SQLite, a
terms table (`memory_terms`, GIN-indexed) in PostgreSQL. Both rank with BM25 over the same terms
(`tools.memory.text.index_terms`) and return (key, score) with higher scores more relevant."""

from __future__ import annotations

import contextlib
import hashlib
import math
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tools.sqlite_wal import write_transaction

IndexRow = tuple[int, str, str, str, str]  # rowid, space-joined terms, kind, user label, key
BM25_K1 = 1.2
BM25_B = 0.75

# `owner` holds one token naming the row's kind and user, so that FTS5 finds a user's rows through
# its index: a filter on an unindexed column reads every row the terms match, of every user. (bm25
# counts a row's length over all its columns: with the owner token, one more than its terms.)
FTS5_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5("
    "terms, owner, kind UNINDEXED, user UNINDEXED, key UNINDEXED, "
    "tokenize = 'unicode61 remove_diacritics 2')"
)
BM25_TERMS_ONLY = "bm25(memory_fts, 1.0, 0.0)"  # the owner token adds nothing to a row's score
PG_DDL = (
    "CREATE TABLE IF NOT EXISTS memory_terms (rowid BIGINT PRIMARY KEY, kind TEXT NOT NULL, "
    "user_label TEXT NOT NULL, key TEXT NOT NULL, terms TEXT[] NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memory_terms_terms_idx ON memory_terms USING gin (terms)",
    "CREATE INDEX IF NOT EXISTS memory_terms_user_idx ON memory_terms (kind, user_label)",
)
PG_UPSERT = (
    "INSERT INTO memory_terms (rowid, terms, kind, user_label, key) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (rowid) DO UPDATE SET terms = EXCLUDED.terms, kind = EXCLUDED.kind, "
    "user_label = EXCLUDED.user_label, key = EXCLUDED.key"
)


class MemoryIndex(Protocol):
    def create(self, stored: Callable[[], Sequence[IndexRow]]) -> None:
        """Create the index if it is missing (or outdated), filled with `stored()`: the rows of
        every stored item."""

    def upsert(self, rows: Sequence[IndexRow]) -> None: ...

    def delete(self, rowids: Sequence[int]) -> None: ...

    def count(self, kind: str, label: str) -> int: ...

    def search(
        self,
        kind: str,
        label: str,
        terms: Sequence[str],
        require_all: bool,
        limit: int,
        skip_prefix: str = "",
    ) -> list[tuple[str, float]]:
        """(key, score) of the best `limit` matches, leaving out keys that start with
        `skip_prefix` (when it is not empty)."""


class Fts5Index:
    """`memory_fts` in the SQLite database; ranking is FTS5's own bm25()."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock) -> None:
        self.conn, self.lock = conn, lock

    def create(self, stored: Callable[[], Sequence[IndexRow]]) -> None:
        """Create the table, or replace one without the `owner` column (made before it had one),
        and fill it in the same transaction: a crash leaves the old index or all of the new one."""
        with self.lock:
            if self._current():
                return
        rows = stored()  # read through the store, which takes this same lock
        with self.lock, write_transaction(self.conn):
            if self._current():  # another process made it meanwhile
                return
            self.conn.execute("DROP TABLE IF EXISTS memory_fts")
            self.conn.execute(FTS5_DDL)
            self._insert(rows)

    def _current(self) -> bool:
        found = "SELECT 1 FROM pragma_table_info('memory_fts') WHERE name = 'owner'"
        return self.conn.execute(found).fetchone() is not None

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        with self.lock:
            if len(rows) == 1:
                self._insert(rows)
                return
            with write_transaction(self.conn):
                self._insert(rows)

    def _insert(self, rows: Sequence[IndexRow]) -> None:
        self.conn.executemany(
            "INSERT OR REPLACE INTO memory_fts(rowid, terms, owner, kind, user, key) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (rowid, terms, owner(kind, label), kind, label, key)
                for rowid, terms, kind, label, key in rows
            ],
        )

    def delete(self, rowids: Sequence[int]) -> None:
        with self.lock:
            self.conn.execute(
                f"DELETE FROM memory_fts WHERE rowid IN ({','.join('?' * len(rowids))})",
                list(rowids),
            )

    def count(self, kind: str, label: str) -> int:
        with self.lock:
            (count,) = self.conn.execute(
                "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ? AND kind = ? AND user = ?",
                (_owned_by(kind, label), kind, label),
            ).fetchone()
        return count

    def search(
        self,
        kind: str,
        label: str,
        terms: Sequence[str],
        require_all: bool,
        limit: int,
        skip_prefix: str = "",
    ) -> list[tuple[str, float]]:
        # Terms are runs of letters, digits and marks only, so a double-quoted string is always one
        # literal phrase: no FTS5 operator, column filter or quote can come from the user's text.
        matching = f" {'AND' if require_all else 'OR'} ".join(f'"{term}"' for term in terms)
        expression = f"{_owned_by(kind, label)} AND terms : ({matching})"
        with self.lock:
            rows = self.conn.execute(
                f"SELECT key, {BM25_TERMS_ONLY} FROM memory_fts "
                "WHERE memory_fts MATCH ? AND kind = ? AND user = ? "
                "AND (? = '' OR substr(key, 1, length(?)) <> ?) "
                f"ORDER BY {BM25_TERMS_ONLY} LIMIT ?",
                (expression, kind, label, skip_prefix, skip_prefix, skip_prefix, limit),
            ).fetchall()
        return [(key, -score) for key, score in rows]  # FTS5 bm25: lower is better


def owner(kind: str, label: str) -> str:
    """The one token (letters and digits) that stands for a kind and user label in the index."""
    digest = hashlib.blake2b(f"{kind}\0{label}".encode(), digest_size=12).hexdigest()
    return f"o{digest}"


def _owned_by(kind: str, label: str) -> str:
    return f'owner : "{owner(kind, label)}"'


class PostgresTermIndex:
    """`memory_terms` in the PostgreSQL database: candidates through a GIN index on the terms
    array, ranked with BM25 over the user's own items of that kind."""

    def __init__(self, conn: Any, lock: threading.Lock) -> None:
        self.conn, self.lock = conn, lock

    def create(self, stored: Callable[[], Sequence[IndexRow]]) -> None:
        import psycopg

        with self.lock:
            row = self.conn.execute("SELECT to_regclass('memory_terms') AS name").fetchone()
            for ddl in PG_DDL:
                with contextlib.suppress(psycopg.errors.UniqueViolation):  # a concurrent create
                    self.conn.execute(ddl)
        if row["name"] is None and (rows := stored()):
            self.upsert(rows)

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        params = [
            (rowid, terms.split(), kind, label, key) for rowid, terms, kind, label, key in rows
        ]
        with self.lock, self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(PG_UPSERT, params)

    def delete(self, rowids: Sequence[int]) -> None:
        with self.lock:
            self.conn.execute("DELETE FROM memory_terms WHERE rowid = ANY(%s)", (list(rowids),))

    def count(self, kind: str, label: str) -> int:
        with self.lock:
            row = self.conn.execute(
                "SELECT count(*) AS n FROM memory_terms WHERE kind = %s AND user_label = %s",
                (kind, label),
            ).fetchone()
        return row["n"]

    def search(
        self,
        kind: str,
        label: str,
        terms: Sequence[str],
        require_all: bool,
        limit: int,
        skip_prefix: str = "",
    ) -> list[tuple[str, float]]:
        match = "@>" if require_all else "&&"
        scope = "kind = %s AND user_label = %s"
        with self.lock:
            stats = self.conn.execute(
                "SELECT count(*) AS n, COALESCE(avg(cardinality(terms)), 0) AS avgdl "
                f"FROM memory_terms WHERE {scope}",
                (kind, label),
            ).fetchone()
            frequency = {
                row["term"]: row["n"]
                for row in self.conn.execute(
                    "SELECT t.term, count(*) AS n FROM memory_terms, unnest(%s::text[]) AS t(term) "
                    f"WHERE {scope} AND t.term = ANY(terms) GROUP BY t.term",
                    (list(terms), kind, label),
                )
            }
            candidates = self.conn.execute(
                f"SELECT key, terms FROM memory_terms WHERE {scope} AND terms {match} %s::text[] "
                "AND (%s = '' OR left(key, length(%s)) <> %s)",
                (kind, label, list(terms), skip_prefix, skip_prefix, skip_prefix),
            ).fetchall()
        scored = [
            (row["key"], bm25(row["terms"], terms, frequency, stats["n"], float(stats["avgdl"])))
            for row in candidates
        ]
        return sorted(scored, key=lambda hit: (-hit[1], hit[0]))[:limit]


def bm25(
    document: Sequence[str],
    terms: Sequence[str],
    frequency: dict[str, int],
    total: int,
    average_length: float,
) -> float:
    """The BM25 score of a document (its terms) for the query `terms`, given each term's document
    frequency, the number of documents and their average length."""
    counts = Counter(document)
    length_norm = 1 - BM25_B + BM25_B * len(document) / (average_length or 1)
    score = 0.0
    for term in terms:
        tf = counts.get(term, 0)
        if not tf:
            continue
        # The count and the frequencies are separate statements: rows added in between by another
        # process could make n exceed the total (and the logarithm's argument negative).
        n = min(frequency.get(term, 0), total)
        idf = max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6)  # floored as in FTS5
        score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * length_norm)
    return score
