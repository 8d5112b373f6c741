"""LocalIndex: the user's documents in SQLite FTS5 tables, added, listed, removed and searched
with BM25, and what its calls report."""

from __future__ import annotations

import builtins
import hashlib
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tools.errors import ToolInputError, ToolNotFoundError
from tools.search.corpus_tables import (
    SCHEMA,
    connect,
    database_error,
    delete_document,
    has_schema,
    ids_for,
    insert_document,
)
from tools.search.documents import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_MAX_FILE_BYTES,
    parse_document,
    read_document,
    split_chunks,
    walk_documents,
)
from tools.search.query import HIGHLIGHT, highlight_window, plan_query
from tools.search.result import SearchResult, one_line
from tools.sqlite_wal import write_transaction

SNIPPET_TOKENS = 24
# Title hits count more than body hits; the hidden `grams` column counts like the body.
_BM25 = "bm25(corpus_fts, 3.0, 1.0, 1.0)"
# Private-use marks that cannot occur in indexed text, so a highlight is detectable.
_OPEN, _CLOSE = "\ue000", "\ue001"


class EmptyCorpusError(ToolNotFoundError):
    """Raised when the local corpus is searched while it holds no document."""


class UnknownDocumentError(ToolNotFoundError):
    """Raised by LocalIndex.remove for an id or path that is not in the corpus."""


@dataclass(frozen=True)
class DocumentInfo:
    """A document in the corpus, as `corpus list` shows it."""

    id: int
    path: str
    title: str
    chunks: int
    bytes: int
    added_at: str


@dataclass(frozen=True)
class FileOutcome:
    """What `add` did with one file; `detail` is the skip reason or a note (chunks, decoding)."""

    path: str
    status: Literal["added", "updated", "unchanged", "skipped"]
    detail: str = ""


@dataclass(frozen=True)
class AddReport:
    """The outcome of one `add` call, file by file, in the order the files were found."""

    files: tuple[FileOutcome, ...]

    def with_status(self, status: str) -> list[FileOutcome]:
        return [f for f in self.files if f.status == status]

    @property
    def added(self) -> list[FileOutcome]:
        return self.with_status("added")

    @property
    def updated(self) -> list[FileOutcome]:
        return self.with_status("updated")

    @property
    def unchanged(self) -> list[FileOutcome]:
        return self.with_status("unchanged")

    @property
    def skipped(self) -> list[FileOutcome]:
        return self.with_status("skipped")


class LocalIndex:
    """The user's documents in SQLite FTS5 tables (`corpus_*`) of `db_path`, ranked with BM25.

    Every call opens its own short-lived connection (WAL, busy timeout), so one index can be used
    from the tool threads and beside the checkpointer's connection.
    """

    def __init__(
        self,
        db_path: Path,
        *,
        busy_timeout: float = 5.0,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
    ) -> None:
        self.db_path = Path(db_path)
        self.busy_timeout = busy_timeout
        self.max_file_bytes = max_file_bytes
        self.chunk_chars = chunk_chars

    def add(self, paths: Iterable[Path | str]) -> AddReport:
        """Index files and the supported files below directories; a changed file is replaced."""
        outcomes: list[FileOutcome] = []
        seen: set[str] = set()
        with self._database() as conn:
            conn.executescript(SCHEMA)
            for path, problem in walk_documents(paths):
                if problem:
                    outcomes.append(FileOutcome(str(path), "skipped", problem))
                elif str(path) not in seen:
                    seen.add(str(path))
                    outcomes.append(self._add_file(conn, path))
        return AddReport(tuple(outcomes))

    def list(self) -> list[DocumentInfo]:
        """Every document, by path."""
        if not self.db_path.exists():
            return []
        with self._database() as conn:
            if not has_schema(conn):
                return []
            rows = conn.execute(
                "SELECT id, path, title, chunks, bytes, added_at FROM corpus_documents ORDER BY path"
            ).fetchall()
        return [DocumentInfo(*row) for row in rows]

    def remove(self, path_or_id: str | int) -> int:
        """Remove a document by id or path, or every document below a directory; returns the count."""
        key = str(path_or_id).strip()
        if not key:
            raise UnknownDocumentError(
                "no document id or path given; list them with: waypoint corpus list"
            )
        if not self.db_path.exists():
            raise _unknown_document(key)
        with self._database() as conn:
            if not has_schema(conn):
                raise _unknown_document(key)
            ids = ids_for(conn, key)
            if not ids:
                raise _unknown_document(key)
            with write_transaction(conn):
                for doc_id in ids:
                    delete_document(conn, doc_id)
        return len(ids)

    def search(self, query: str, max_results: int = 5) -> builtins.list[SearchResult]:
        """The best chunk of each of the `max_results` best documents: documents holding every
        term first, then documents holding some of them."""
        if not query.strip():
            raise ToolInputError("the query is empty; give a few words to search for")
        if max_results < 1:
            raise ToolInputError("max_results must be at least 1")
        if not self.db_path.exists():
            raise _empty_corpus()
        with self._database() as conn:
            if (
                not has_schema(conn)
                or not conn.execute("SELECT 1 FROM corpus_documents LIMIT 1").fetchone()
            ):
                raise _empty_corpus()
            plan = plan_query(query)
            if plan is None:
                return []
            hits: dict[int, tuple[int, float, str]] = {}
            for expression in dict.fromkeys((plan.strict, plan.loose)):
                _collect_hits(conn, expression, hits, max_results)
            return [
                self._result(conn, doc_id, chunk_id, rank, expression, plan.needles)
                for doc_id, (chunk_id, rank, expression) in hits.items()
            ]

    def _result(
        self,
        conn: sqlite3.Connection,
        doc_id: int,
        chunk_id: int,
        rank: float,
        expression: str,
        needles: tuple[str, ...],
    ) -> SearchResult:
        path, title = conn.execute(
            "SELECT path, title FROM corpus_documents WHERE id = ?", (doc_id,)
        ).fetchone()
        snippet, body = conn.execute(
            "SELECT snippet(corpus_fts, 1, ?, ?, '…', ?), body FROM corpus_fts "
            "WHERE corpus_fts MATCH ? AND rowid = ?",
            (_OPEN, _CLOSE, SNIPPET_TOKENS, expression, chunk_id),
        ).fetchone()
        if _OPEN in snippet:
            snippet = snippet.replace(_OPEN, HIGHLIGHT).replace(_CLOSE, HIGHLIGHT)
        else:
            snippet = highlight_window(body, needles) or snippet
        return SearchResult(title=title, snippet=one_line(snippet), source=path, score=-rank)

    def _add_file(self, conn: sqlite3.Connection, path: Path) -> FileOutcome:
        shown = str(path)
        raw, problem = read_document(path, self.max_file_bytes)
        if raw is None:
            return FileOutcome(shown, "skipped", problem)
        digest = hashlib.sha256(raw).hexdigest()
        row = conn.execute(
            "SELECT id, sha256 FROM corpus_documents WHERE path = ?", (shown,)
        ).fetchone()
        if row and row[1] == digest:
            return FileOutcome(shown, "unchanged")
        parsed = parse_document(path.name, raw)
        chunks = split_chunks(parsed.text, self.chunk_chars)
        with write_transaction(conn):
            row = conn.execute(
                "SELECT id FROM corpus_documents WHERE path = ?", (shown,)
            ).fetchone()
            if row:
                delete_document(conn, row[0])
            if not chunks:
                earlier = " (its earlier version was removed from the corpus)" if row else ""
                return FileOutcome(shown, "skipped", f"contains no text{earlier}")
            insert_document(conn, shown, parsed.title, digest, len(raw), chunks)
        notes = [f"{len(chunks)} chunk{'s' if len(chunks) != 1 else ''}"]
        if parsed.replaced_bytes:
            notes.append("not valid UTF-8: undecodable bytes were replaced")
        return FileOutcome(shown, "updated" if row else "added", "; ".join(notes))

    @contextmanager
    def _database(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = connect(self.db_path, self.busy_timeout)
            try:
                yield conn
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise database_error(self.db_path, exc) from exc


def _collect_hits(
    conn: sqlite3.Connection,
    expression: str,
    hits: dict[int, tuple[int, float, str]],
    limit: int,
) -> None:
    """Add the best chunk of each not-yet-found document, best first, until `limit` documents."""
    if len(hits) >= limit:
        return
    rows = conn.execute(
        f"SELECT c.doc_id, corpus_fts.rowid, {_BM25} AS bm25_rank FROM corpus_fts "
        "JOIN corpus_chunks c ON c.id = corpus_fts.rowid "
        "WHERE corpus_fts MATCH ? ORDER BY bm25_rank",
        (expression,),
    )
    for doc_id, chunk_id, rank in rows:
        if doc_id not in hits:
            hits[doc_id] = (chunk_id, rank, expression)
            if len(hits) >= limit:
                break


def _unknown_document(key: str) -> UnknownDocumentError:
    return UnknownDocumentError(
        f"no document with id or path {key!r} in the corpus; list the ids and paths with: "
        "waypoint corpus list"
    )


def _empty_corpus() -> EmptyCorpusError:
    return EmptyCorpusError(
        "the document corpus is empty, so there is nothing to search; tell the user they can add "
        "documents with `waypoint corpus add PATH`",
        user_message="the document corpus is empty; add documents with: waypoint corpus add PATH",
    )
