"""Checkpoint blobs are stored compressed (app/db/compressed.py): a thread reads back the same,
rows written before (uncompressed) still load, and what a compressed blob inflates to goes through
the same strict checks as any blob, with a cap on its size. SQLite and PostgreSQL alike."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import zlib
from pathlib import Path

import ormsgpack
import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from app.db.compressed import MAX_INFLATED_BYTES
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


def inflate_every_row(database: str) -> int:
    """Store every compressed blob as Waypoint wrote it before compression: the serializer's own
    bytes under its own type."""
    changed = 0
    tables = SQLITE_BLOBS if not database.startswith("postgresql") else POSTGRES_BLOBS
    for table, type_column, blob_column in tables:
        select = f"SELECT {type_column}, {blob_column} FROM {table} WHERE {type_column} LIKE "
        for type_, blob in execute(database, select + "'%+zlib'", select + "'%%+zlib'"):
            [(count,)] = execute(
                database,
                f"UPDATE {table} SET {type_column} = ?, {blob_column} = ? "
                f"WHERE {type_column} = ? AND {blob_column} = ?",
                f"UPDATE {table} SET {type_column} = %s, {blob_column} = %s "
                f"WHERE {type_column} = %s AND {blob_column} = %s",
                (type_.removesuffix("+zlib"), zlib.decompress(bytes(blob)), type_, blob),
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
    assert "msgpack+zlib" in blob_types(database)
    assert human_texts("v") == [LONG]


def test_rows_written_before_compression_still_load_and_the_thread_goes_on(database: str):
    assert run_cli("chat", "-t", "v", "-m", LONG).returncode == 0
    before = shown("v")
    assert inflate_every_row(database) > 0
    assert "msgpack+zlib" not in blob_types(database)
    assert shown("v") == before

    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    assert human_texts("v") == [LONG, "what is 6 times 7"]
    assert "42" in shown("v")["messages"][-1]["content"]


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
    for args in (["show", "-t", "v"], ["history", "-t", "v"], ["chat", "-t", "v", "-m", "hi"]):
        result = run_cli(*args)
        stderr = result.stderr.decode()
        assert result.returncode == 3, (args, stderr)
        assert "of thread v is unreadable" in stderr and reason in stderr, (args, stderr)
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
    assert types and not any(t.endswith("+zlib") for t in types)

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


def test_a_database_made_by_plain_sqlitesaver_is_used_as_it_is(db_path: Path):
    db_path.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        SqliteSaver(connection).setup()
    assert run_cli("chat", "-t", "v", "-m", "what is 6 times 7").returncode == 0
    assert run_cli("chat", "-t", "v", "-m", LONG).returncode == 0
    assert has_rowid(db_path, "writes")
    assert human_texts("v") == ["what is 6 times 7", LONG]
