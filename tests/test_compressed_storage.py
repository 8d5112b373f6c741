"""Checkpoint blobs are stored compressed (app/db/compressed.py), small ones against the preset
dictionary d1 (app/db/dictionary.py): a thread reads back the same, rows written before
(uncompressed, or compressed without the dictionary) still load, and what a compressed blob
inflates to goes through the same strict checks as any blob, with a cap on its size. SQLite and
PostgreSQL alike."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path

import ormsgpack
import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from app.db import dictionary
from app.db.compressed import MAX_INFLATED_BYTES
from app.db.unreadable import UnreadableCheckpointError
from tests.conftest import run_cli
from tests.db_helpers import execute

LONG = "please keep this note: " + " ".join(f"line {n} of the note" for n in range(300))
# (table, type column, blob column) of every place a saver keeps serialised values
SQLITE_BLOBS = [("checkpoints", "type", "checkpoint"), ("writes", "type", "value")]
POSTGRES_BLOBS = [("checkpoint_blobs", "type", "blob"), ("checkpoint_writes", "type", "blob")]


def blob_types(database: str) -> set[str]:
    tables = SQLITE_BLOBS if not database.startswith("postgresql") else POSTGRES_BLOBS
    types: set[str] = set()
    for table, type_column, _ in tables:
        sql = f"SELECT DISTINCT {type_column} FROM {table}"
        types |= {row[0] for row in execute(database, sql, sql)}
    return types


D1 = "+zlib-d1"


def plain(type_: str, blob: bytes) -> tuple[str, bytes]:
    """A stored blob as the serializer made it (inflated here, without Waypoint's code)."""
    if type_.endswith(D1):
        inflater = zlib.decompressobj(zdict=dictionary.PATH.read_bytes())
        return type_.removesuffix(D1), inflater.decompress(bytes(blob)) + inflater.flush()
    return type_.removesuffix("+zlib"), zlib.decompress(bytes(blob))


def without_dictionary(type_: str, blob: bytes) -> tuple[str, bytes]:
    """A blob as Waypoint compressed it before the dictionary: plain zlib."""
    base, data = plain(type_, blob)
    return base + "+zlib", zlib.compress(data)


def rewrite_compressed_rows(
    database: str, change: Callable[[str, bytes], tuple[str, bytes]]
) -> int:
    """Store every compressed blob as `change` makes it."""
    changed = 0
    tables = SQLITE_BLOBS if not database.startswith("postgresql") else POSTGRES_BLOBS
    for table, type_column, blob_column in tables:
        select = f"SELECT {type_column}, {blob_column} FROM {table} WHERE {type_column} LIKE "
        for type_, blob in execute(database, select + "'%+zlib%'", select + "'%%+zlib%%'"):
            [(count,)] = execute(
                database,
                f"UPDATE {table} SET {type_column} = ?, {blob_column} = ? "
                f"WHERE {type_column} = ? AND {blob_column} = ?",
                f"UPDATE {table} SET {type_column} = %s, {blob_column} = %s "
                f"WHERE {type_column} = %s AND {blob_column} = %s",
                (*change(type_, bytes(blob)), type_, blob),
            )
            changed += count
    return changed


def shown(thread: str) -> dict:
    result = run_cli("show", "-t", thread, "--json")
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def human_texts(thread: str) -> list[str]:
    return [m["content"] for m in shown(thread)["messages"] if m["type"] == "human"]


def test_a_long_message_is_stored_compressed_and_reads_back_whole(database: str):
    assert run_cli("chat", "-t", "v", "-m", LONG).returncode == 0
    assert "msgpack+zlib-d1" in blob_types(database)
    assert human_texts("v") == [LONG]


def test_checkpoints_and_message_writes_shrink_against_the_dictionary(db_path: Path):
    """A checkpoint and a short message barely shrink alone; against d1 they take a fifth to a
    third of their bytes (the SQLite checkpoints table holds whole checkpoints)."""
    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        rows = connection.execute(
            "SELECT type, checkpoint FROM checkpoints UNION ALL "
            "SELECT type, value FROM writes WHERE channel = 'messages'"
        ).fetchall()
    stored = [(len(blob), len(plain(type_, blob)[1])) for type_, blob in rows]
    assert all(type_ == "msgpack+zlib-d1" for type_, _ in rows), {t for t, _ in rows}
    assert sum(size for size, _ in stored) * 3 < sum(raw for _, raw in stored)
    assert (
        sum(size for size, _ in stored) * 3
        < sum(len(zlib.compress(plain(*r)[1])) for r in rows) * 2
    )


def test_rows_written_before_compression_still_load_and_the_thread_goes_on(database: str):
    assert run_cli("chat", "-t", "v", "-m", LONG).returncode == 0
    before = shown("v")
    assert rewrite_compressed_rows(database, plain) > 0
    assert not any("zlib" in t for t in blob_types(database))
    assert shown("v") == before

    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    assert human_texts("v") == [LONG, "what is 6 times 7"]
    assert "42" in shown("v")["messages"][-1]["content"]


def test_rows_compressed_before_the_dictionary_still_load_and_the_thread_goes_on(database: str):
    assert run_cli("chat", "-t", "v", "-m", LONG).returncode == 0
    before = shown("v")
    assert rewrite_compressed_rows(database, without_dictionary) > 0
    assert not any(t.endswith(D1) for t in blob_types(database))
    assert shown("v") == before

    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    assert human_texts("v") == [LONG, "what is 6 times 7"]
    assert any(t.endswith(D1) for t in blob_types(database))


def test_the_dictionary_is_refused_when_it_is_not_d1(tmp_path: Path, monkeypatch):
    """Blobs written against d1 inflate only with d1's bytes: a changed file is an error that says
    to reinstall, never a dictionary used as it is."""
    changed = tmp_path / "zlib-d1.bin"
    changed.write_bytes(dictionary.PATH.read_bytes()[:-1] + b"?")
    monkeypatch.setattr(dictionary, "PATH", changed)
    dictionary.dictionary_v1.cache_clear()
    try:
        with pytest.raises(UnreadableCheckpointError, match="reinstall Waypoint"):
            dictionary.dictionary_v1()
    finally:
        dictionary.dictionary_v1.cache_clear()


def put_in_the_last_message_write(database: str, type_: str, blob: bytes) -> None:
    [(changed,)] = execute(
        database,
        "UPDATE writes SET value = ?, type = ? WHERE thread_id = 'v' AND channel = 'messages' "
        "AND checkpoint_id = (SELECT MAX(checkpoint_id) FROM writes WHERE thread_id = 'v' "
        "AND channel = 'messages')",
        "UPDATE checkpoint_writes SET blob = %s, type = %s WHERE thread_id = 'v' "
        "AND channel = 'messages' AND checkpoint_id = (SELECT MAX(checkpoint_id) FROM "
        "checkpoint_writes WHERE thread_id = 'v' AND channel = 'messages')",
        (blob, type_),
    )
    assert changed > 0


def bomb(inflated: int) -> bytes:
    """A valid zlib stream of `inflated` zero bytes (about a thousandth of that compressed)."""
    deflater = zlib.compressobj(9)
    chunk = bytes(1024 * 1024)
    parts = [deflater.compress(chunk) for _ in range(inflated // len(chunk))]
    return b"".join(parts) + deflater.flush()


def blocked_call() -> bytes:
    """msgpack of `os.system("touch pwned")` as a tampered blob would carry it."""
    call = ormsgpack.packb(["os", "system", ["touch pwned"]])
    return ormsgpack.packb([ormsgpack.Ext(1, call)])


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (bomb(MAX_INFLATED_BYTES + 1024 * 1024), "a compressed blob inflates beyond 64 MiB"),
        (zlib.compress(blocked_call()), "the type os.system is not allowed"),
        (zlib.compress(ormsgpack.packb(["touch pwned"])), "holds a str, not a message"),
        (zlib.compress(ormsgpack.packb(LONG))[:-9], "a compressed blob is cut short"),
        (zlib.compress(b"x") + b"tail", "has bytes after its end"),
        (b"not zlib at all", "a compressed blob does not inflate"),
    ],
    ids=["bomb", "blocked-object", "plain-string", "cut-short", "trailing-bytes", "not-zlib"],
)
def test_a_tampered_compressed_blob_is_unreadable(database: str, blob: bytes, reason: str):
    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    put_in_the_last_message_write(database, "msgpack+zlib", blob)
    assert_unreadable("v", reason)


def against(zdict: bytes, data: bytes) -> bytes:
    deflater = zlib.compressobj(zdict=zdict)
    return deflater.compress(data) + deflater.flush()


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (against(b"another dictionary", ormsgpack.packb(LONG)), "does not inflate"),
        (zlib.compress(ormsgpack.packb(LONG)), "holds a str, not a message"),
        (
            against(dictionary.PATH.read_bytes(), blocked_call()),
            "the type os.system is not allowed",
        ),
    ],
    ids=["other-dictionary", "no-dictionary", "blocked-object"],
)
def test_a_tampered_dictionary_blob_is_unreadable(database: str, blob: bytes, reason: str):
    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    put_in_the_last_message_write(database, "msgpack+zlib-d1", blob)
    assert_unreadable("v", reason)


def assert_unreadable(thread: str, reason: str) -> None:
    for args in (
        ["show", "-t", thread],
        ["history", "-t", thread],
        ["chat", "-t", thread, "-m", "hi"],
    ):
        result = run_cli(*args)
        stderr = result.stderr.decode()
        assert result.returncode == 3, (args, stderr)
        assert f"of thread {thread} is unreadable" in stderr and reason in stderr, (args, stderr)
        assert "Traceback" not in stderr and "pwned" not in result.stdout.decode()


def test_an_export_carries_plain_blobs_and_imports_back(database: str, tmp_path: Path):
    assert run_cli("chat", "-t", "v", "-m", LONG).returncode == 0
    exported = run_cli("export", "-t", "v")
    assert exported.returncode == 0, exported.stderr.decode()
    document = json.loads(exported.stdout)
    types = {
        blob["type"]
        for checkpoint in document["checkpoints"]
        for blob in [checkpoint["checkpoint"], *(w["value"] for w in checkpoint["writes"])]
    }
    assert types and not any("zlib" in t for t in types)

    path = tmp_path / "v.json"
    path.write_bytes(exported.stdout)
    assert run_cli("import", str(path), "--as", "copy").returncode == 0
    assert shown("copy")["messages"] == shown("v")["messages"]


# --- the SQLite layout ------------------------------------------------------------------------------


def table_shape(path: Path, table: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute(f"PRAGMA table_info({table})").fetchall()


def has_rowid(path: Path, table: str) -> bool:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        try:
            connection.execute(f"SELECT rowid FROM {table} LIMIT 1")
        except sqlite3.OperationalError:
            return False
    return True


def test_a_new_database_keeps_writes_in_langgraphs_columns_clustered_on_their_key(
    db_path: Path, tmp_path: Path
):
    """One b-tree instead of a table and an index of the same key; the columns and the primary
    key stay exactly what SqliteSaver creates (an upgrade that changes them fails here)."""
    plain = tmp_path / "plain.sqlite"
    with contextlib.closing(sqlite3.connect(plain)) as connection:
        SqliteSaver(connection).setup()
    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    assert table_shape(db_path, "writes") == table_shape(plain, "writes")
    assert table_shape(db_path, "checkpoints") == table_shape(plain, "checkpoints")
    assert not has_rowid(db_path, "writes")
    assert not has_rowid(db_path, "checkpoints")


def test_a_database_made_by_plain_sqlitesaver_is_used_as_it_is(db_path: Path):
    db_path.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        SqliteSaver(connection).setup()
    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    assert run_cli("chat", "-t", "v", "-m", LONG).returncode == 0
    assert has_rowid(db_path, "writes") and has_rowid(db_path, "checkpoints")
    assert human_texts("v") == ["what is 6 times 7", LONG]
