"""The corpus tables in SQLite (`corpus_documents`, `corpus_chunks`, `corpus_fts`): schema,
connections, transactions, and the row writes and lookups LocalIndex builds on."""

from __future__ import annotations

import datetime
import os
import sqlite3
from contextlib import suppress
from pathlib import Path

from tools.errors import ToolError
from tools.search.query import index_grams
from tools.sqlite_wal import use_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS corpus_documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS corpus_chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS corpus_chunks_doc ON corpus_chunks(doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS corpus_fts USING fts5(
    title, body, grams, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


class CorpusDatabaseError(ToolError):
    """Raised when the database holding the corpus cannot be opened, read or written."""


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        use_wal(conn, busy_timeout)
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def database_error(path: Path, exc: sqlite3.DatabaseError) -> CorpusDatabaseError:
    text = str(exc)
    if "no such module: fts5" in text:
        reason = "this Python's SQLite was built without FTS5, which the local corpus needs"
    elif "locked" in text or "busy" in text:
        reason = "it is locked by another process; try again in a moment"
    else:
        reason = text
    return CorpusDatabaseError(
        f"the document index in {path} cannot be used: {reason}; tell the user",
        user_message=f"the document index in {path} cannot be used: {reason}",
    )


def has_schema(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('corpus_documents', 'corpus_fts')"
    ).fetchone()
    return row[0] == 2


def insert_document(
    conn: sqlite3.Connection, path: str, title: str, digest: str, size: int, chunks: list[str]
) -> None:
    added_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    doc_id = conn.execute(
        "INSERT INTO corpus_documents (path, title, sha256, bytes, chunks, added_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (path, title, digest, size, len(chunks), added_at),
    ).lastrowid
    title_grams = index_grams(title)
    for seq, text in enumerate(chunks):
        chunk_id = conn.execute(
            "INSERT INTO corpus_chunks (doc_id, seq) VALUES (?, ?)", (doc_id, seq)
        ).lastrowid
        conn.execute(
            "INSERT INTO corpus_fts (rowid, title, body, grams) VALUES (?, ?, ?, ?)",
            (chunk_id, title, text, f"{title_grams} {index_grams(text)}".strip()),
        )


def delete_document(conn: sqlite3.Connection, doc_id: int) -> None:
    conn.execute(
        "DELETE FROM corpus_fts WHERE rowid IN (SELECT id FROM corpus_chunks WHERE doc_id = ?)",
        (doc_id,),
    )
    conn.execute("DELETE FROM corpus_chunks WHERE doc_id = ?", (doc_id,))
    conn.execute("DELETE FROM corpus_documents WHERE id = ?", (doc_id,))


def ids_for(conn: sqlite3.Connection, key: str) -> list[int]:
    """A numeric key is an id if such a document exists; otherwise a file or directory path."""
    if key.isdigit():
        row = conn.execute("SELECT id FROM corpus_documents WHERE id = ?", (int(key),)).fetchone()
        if row:
            return [row[0]]
    candidates = {key}
    with suppress(OSError, RuntimeError):
        candidates.add(str(Path(key).expanduser().resolve()))
    ids: list[int] = []
    for path in candidates:
        prefix = path.rstrip("/") + "/"
        ids += [
            row[0]
            for row in conn.execute(
                "SELECT id FROM corpus_documents WHERE path = ? OR substr(path, 1, ?) = ?",
                (path, len(prefix), prefix),
            )
        ]
    return sorted(set(ids))
