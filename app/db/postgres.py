"""The PostgreSQL backend: PostgresSaver with the strict serializer, and Waypoint's own SQL over its
`checkpoints` (JSONB checkpoint and metadata), `checkpoint_blobs` and `checkpoint_writes` tables.

PostgresSaver keeps a channel's non-primitive values in `checkpoint_blobs`, keyed by (channel,
version) and shared by every checkpoint at that version; deleting checkpoints therefore also deletes
the blobs no remaining checkpoint of the thread references, and nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Collection, Iterator
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import DictRow, tuple_row

from app.db.base import (
    SAVE_THREAD_INFO,
    THREAD_INFO_DDL,
    CheckpointRecord,
    Database,
    DeltaChannels,
    Health,
    Removal,
    SpaceReport,
    StoredWrite,
    ThreadInfo,
    ThreadRow,
    UnreadableCheckpointError,
    checked_metadata,
    checkpoint_serializer,
    json_object,
)
from app.db.crons import CRONS_SETUP
from app.db.fence import FencedWrites
from app.db.location import DatabaseLocation
from app.db.pg_connect import connect, connection_error
from app.db.pg_lock import dead_writers, ensure_writers_table
from app.db.pg_setup import migrate_once
from app.db.raw import decode
from app.db.run_records import RUNS_DDL, RunTable, Statements
from app.db.strict import CheckedReads
from app.text import plural

TURN = "CASE WHEN jsonb_typeof(metadata -> 'turn') = 'number' THEN (metadata ->> 'turn')::numeric::bigint END"
LIST_THREADS_SQL = f"""
SELECT thread_id, COUNT(*), MAX(checkpoint_id),
       -- the head's turn, not the highest ever; a rollback's copy stores none: its parent's
       (SELECT COALESCE({TURN.replace("metadata", "head.metadata")},
                        (SELECT {TURN.replace("metadata", "parent.metadata")}
                           FROM checkpoints AS parent
                          WHERE parent.thread_id = head.thread_id AND parent.checkpoint_ns = ''
                            AND parent.checkpoint_id = head.parent_checkpoint_id))
          FROM checkpoints AS head
         WHERE head.thread_id = c.thread_id AND head.checkpoint_ns = ''
           AND head.checkpoint_id = MAX(c.checkpoint_id)),
       (SELECT first.metadata ->> 'preview' FROM checkpoints AS first
         WHERE first.thread_id = c.thread_id AND first.checkpoint_ns = ''
           AND first.metadata ->> 'preview' <> ''
         ORDER BY first.checkpoint_id LIMIT 1)
FROM checkpoints AS c
WHERE checkpoint_ns = ''
GROUP BY thread_id
ORDER BY MAX(checkpoint_id) DESC
"""
CHECKPOINT_BYTES = "pg_column_size(checkpoint) + pg_column_size(metadata)"
THREAD_SIZES_SQL = f"""
SELECT thread_id, SUM(bytes)::bigint FROM (
    SELECT thread_id, SUM({CHECKPOINT_BYTES}) AS bytes FROM checkpoints GROUP BY thread_id
    UNION ALL
    SELECT thread_id, SUM(octet_length(blob)) FROM checkpoint_writes GROUP BY thread_id
    UNION ALL
    SELECT thread_id, SUM(COALESCE(octet_length(blob), 0)) FROM checkpoint_blobs GROUP BY thread_id
) AS sizes
GROUP BY thread_id
"""
# Where LangGraph's delta walk stops: a blob at the checkpoint's version, or an inline value.
DELTA_CHANNELS_SQL = """
SELECT c.checkpoint_id, v.key,
       COALESCE(c.checkpoint -> 'channel_values' -> v.key, 'null'::jsonb) <> 'null'::jsonb
       OR EXISTS (
           SELECT 1 FROM checkpoint_blobs AS b
           WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
             AND b.channel = v.key AND b.version = v.value AND b.type <> 'empty')
FROM checkpoints AS c
CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
WHERE c.thread_id = %s AND c.checkpoint_ns = '' AND v.key = ANY(%s)
"""
ROOT = "thread_id = %(thread)s AND checkpoint_ns = ''"
# Each checkpoint with the blobs of its channels at their versions (as PostgresSaver loads it).
STORED_CHECKPOINTS_SQL = """
SELECT c.checkpoint_id, c.checkpoint,
       (SELECT array_agg(array[b.channel::bytea, b.type::bytea, b.blob])
          FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
          JOIN checkpoint_blobs AS b
            ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
           AND b.channel = v.key AND b.version = v.value)
FROM checkpoints AS c
WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = '' AND c.checkpoint_id = ANY(%(ids)s)
"""
CHOSEN = f"{ROOT} AND checkpoint_id = ANY(%(ids)s)"
# Blobs of the root namespace that no checkpoint outside %(ids)s references.
GARBAGE_BLOBS = f"""
FROM checkpoint_blobs WHERE {ROOT} AND (channel, version) NOT IN (
    SELECT v.key, v.value FROM checkpoints AS c
    CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
    WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = '' AND c.checkpoint_id <> ALL(%(ids)s))
"""
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
# The database's clock in seconds since the epoch (for run leases): the same for every server.
POSTGRES_NOW = "extract(epoch from clock_timestamp())::double precision"


class CheckedPostgresSaver(FencedWrites, CheckedReads, PostgresSaver):
    """PostgresSaver whose reads refuse tampered or damaged data (app/db/strict.py) and whose
    writes end with their run (app/db/fence.py)."""


@contextlib.contextmanager
def open_postgres(location: DatabaseLocation) -> Iterator[PostgresDatabase]:
    assert location.url is not None  # a PostgreSQL location is its URL
    conn = connect(location)
    try:
        saver = CheckedPostgresSaver(conn, serde=checkpoint_serializer())
        try:
            migrate_once(conn, "checkpoints", location.url, lambda: _setup(conn, saver))
        except psycopg.Error as exc:
            raise connection_error(location, exc) from None
        yield PostgresDatabase(location, saver)
    finally:
        conn.close()


def _setup(conn: psycopg.Connection[DictRow], saver: PostgresSaver) -> None:
    """The saver's migrations and the writers table."""
    saver.setup()
    ensure_writers_table(conn)
    conn.execute(THREAD_INFO_DDL)
    for statement in (*CRONS_SETUP, *RUNS_DDL):
        conn.execute(statement)


class PostgresDatabase(Database):
    kind = "postgres"

    def __init__(self, location: DatabaseLocation, saver: PostgresSaver) -> None:
        super().__init__(location)
        self._saver = saver

    @property
    def saver(self) -> PostgresSaver:
        return self._saver

    @property
    def conn(self) -> psycopg.Connection[DictRow]:
        conn = self.saver.conn
        assert isinstance(conn, psycopg.Connection)  # open_postgres gives it a connection, no pool
        return conn

    def _rows(self, sql: str, params: Any = None) -> list[tuple]:
        with self.saver.lock, self.conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def thread_rows(self) -> list[ThreadRow]:
        return [ThreadRow(*row) for row in self._rows(LIST_THREADS_SQL)]

    def thread_sizes(self) -> dict[str, int]:
        return {thread: int(size or 0) for thread, size in self._rows(THREAD_SIZES_SQL)}

    @functools.cached_property
    def runs(self) -> RunTable:
        return RunTable(self._statements, POSTGRES_NOW)

    @contextlib.contextmanager
    def _statements(self, write: bool) -> Iterator[Statements]:
        with (
            self.saver.lock,
            self.conn.transaction(),
            self.conn.cursor(row_factory=tuple_row) as cur,
        ):

            def run(sql: str, params: tuple = ()) -> list[tuple]:
                cur.execute(sql.replace("?", "%s"), params)
                return cur.fetchall() if cur.description is not None else []

            yield run

    def thread_infos(self) -> dict[str, ThreadInfo]:
        rows = self._rows(
            "SELECT thread_id, metadata, created_at, updated_at FROM waypoint_threads"
        )
        return {row[0]: ThreadInfo(row[0], json_object(row[1]), row[2], row[3]) for row in rows}

    def save_thread_info(self, thread_id: str, metadata: dict[str, Any], now: str) -> ThreadInfo:
        with (
            self.saver.lock,
            self.conn.transaction(),
            self.conn.cursor(row_factory=tuple_row) as cur,
        ):
            cur.execute(SAVE_THREAD_INFO, (thread_id, json.dumps(metadata), now, now))
            cur.execute(
                "SELECT created_at FROM waypoint_threads WHERE thread_id = %s", (thread_id,)
            )
            row = cur.fetchone()
        assert row is not None  # the statement before wrote it
        return ThreadInfo(thread_id, metadata, row[0], now)

    def forget_thread_info(self, thread_id: str) -> None:
        with self.saver.lock, self.conn.cursor() as cur:
            cur.execute("DELETE FROM waypoint_threads WHERE thread_id = %s", (thread_id,))
        self.runs.forget_thread(thread_id)

    def _cron_sql(self, sql: str, params: tuple = (), *, write: bool) -> tuple[list[tuple], int]:
        with (
            self.saver.lock,
            self.conn.transaction(),
            self.conn.cursor(row_factory=tuple_row) as cur,
        ):
            cur.execute(sql, params)
            return (cur.fetchall() if cur.description else []), cur.rowcount

    def thread_exists(self, thread_id: str) -> bool:
        sql = "SELECT 1 FROM checkpoints WHERE thread_id = %s LIMIT 1"
        return bool(self._rows(sql, (thread_id,)))

    def checkpoint_records(self, thread_id: str) -> list[CheckpointRecord]:
        rows = self._rows(
            "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
            f"WHERE {ROOT} ORDER BY checkpoint_id",
            {"thread": thread_id},
        )
        return [CheckpointRecord(cid, parent, checked_metadata(meta)) for cid, parent, meta in rows]

    def writer_paths(self, thread_id: str) -> list[tuple[str, str]]:
        sql = f"SELECT DISTINCT checkpoint_id, task_path FROM checkpoint_writes WHERE {ROOT}"
        return self._rows(sql, {"thread": thread_id})

    def write_order(self, thread_id: str) -> list[tuple[str, str, str, str, int]]:
        sql = (
            "SELECT checkpoint_id, task_id, channel, task_path, idx FROM checkpoint_writes "
            f"WHERE {ROOT}"
        )
        return self._rows(sql, {"thread": thread_id})

    def thread_heads(self) -> list[tuple[str, str, bool]]:
        return self._rows(
            "SELECT thread_id, MAX(checkpoint_id), bool_or(checkpoint_ns <> '') FROM checkpoints "
            "GROUP BY thread_id ORDER BY thread_id"
        )

    def delta_reader(
        self, thread_id: str, channels: Collection[str]
    ) -> Callable[[str], DeltaChannels]:
        versioned: dict[str, set[str]] = {}
        stored: dict[str, set[str]] = {}
        for cid, channel, has_value in self._rows(DELTA_CHANNELS_SQL, (thread_id, list(channels))):
            versioned.setdefault(cid, set()).add(channel)
            if has_value:
                stored.setdefault(cid, set()).add(channel)

        def read(checkpoint_id: str) -> DeltaChannels:
            return (
                frozenset(versioned.get(checkpoint_id, ())),
                frozenset(stored.get(checkpoint_id, ())),
            )

        return read

    def stored_checkpoints(self, thread_id: str, checkpoint_ids: Collection[str]) -> dict[str, Any]:
        found = {}
        rows = self._rows(
            STORED_CHECKPOINTS_SQL, {"thread": thread_id, "ids": list(checkpoint_ids)}
        )
        for checkpoint_id, checkpoint, blobs in rows:
            try:
                values = (
                    dict(checkpoint.get("channel_values") or {})
                    if isinstance(checkpoint, dict)
                    else {}
                )
                for channel, type_, blob in blobs or []:
                    if bytes(type_) != b"empty":
                        values[bytes(channel).decode()] = decode(bytes(type_).decode(), bytes(blob))
            except UnreadableCheckpointError as exc:
                exc.thread_id, exc.checkpoint_id = thread_id, checkpoint_id
                raise
            found[checkpoint_id] = (
                checkpoint | {"channel_values": values}
                if isinstance(checkpoint, dict)
                else checkpoint
            )
        return found

    def stored_writes(
        self, thread_id: str, checkpoint_ids: Collection[str], channel: str | None = None
    ) -> dict[str, list[StoredWrite]]:
        sql = (
            "SELECT checkpoint_id, task_path, task_id, idx, channel, type, blob "
            f"FROM checkpoint_writes WHERE {ROOT} AND checkpoint_id = ANY(%(ids)s)"
            + (" AND channel = %(channel)s" if channel is not None else "")
            + " ORDER BY checkpoint_id, task_path, task_id, idx"
        )
        params = {"thread": thread_id, "ids": list(checkpoint_ids), "channel": channel}
        found: dict[str, list[StoredWrite]] = {}
        for checkpoint_id, path, task, idx, name, type_, blob in self._rows(sql, params):
            try:
                value = decode(type_, blob)
            except UnreadableCheckpointError as exc:
                exc.thread_id, exc.checkpoint_id = thread_id, checkpoint_id
                raise
            found.setdefault(checkpoint_id, []).append(StoredWrite(path, task, idx, name, value))
        return found

    def health(self) -> Health:
        try:
            [(version, size, threads)] = self._rows(
                "SELECT current_setting('server_version'), pg_database_size(current_database()), "
                "(SELECT COUNT(DISTINCT thread_id) FROM checkpoints)"
            )
        except psycopg.Error as exc:
            return Health(False, str(connection_error(self.location, exc)))
        return Health(
            True, f"PostgreSQL {version}, {plural(threads, 'thread')}, database {size:,} bytes"
        )

    def dead_writers(self) -> dict[str, str]:
        with self.saver.lock:
            return dead_writers(self.conn)

    def remove(self, thread_id: str, checkpoint_ids: list[str] | None, *, dry_run: bool) -> Removal:
        whole = checkpoint_ids is None
        params = {"thread": thread_id, "ids": checkpoint_ids or []}
        rows = "thread_id = %(thread)s" if whole else CHOSEN
        blobs = "FROM checkpoint_blobs WHERE thread_id = %(thread)s" if whole else GARBAGE_BLOBS
        measures = (
            f"SELECT COUNT(*), COALESCE(SUM({CHECKPOINT_BYTES}), 0) FROM checkpoints WHERE {rows}",
            f"SELECT COUNT(*), COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_writes "
            f"WHERE {rows}",
            f"SELECT COUNT(*), COALESCE(SUM(octet_length(blob)), 0) {blobs}",
        )
        with (
            self.saver.lock,
            self.conn.transaction(),
            self.conn.cursor(row_factory=tuple_row) as cur,
        ):
            counts = [_one_row(cur.execute(sql, params)) for sql in measures]
            if not dry_run:
                cur.execute(f"DELETE FROM checkpoint_writes WHERE {rows}", params)
                cur.execute(f"DELETE FROM checkpoints WHERE {rows}", params)
                cur.execute(f"DELETE {blobs}", params)
        (checkpoints, c_bytes), (writes, w_bytes), (_, b_bytes) = counts
        return Removal(checkpoints, writes, int(c_bytes + w_bytes + b_bytes))

    def reclaim_space(self) -> SpaceReport:
        """VACUUM the checkpoint tables (PostgreSQL reuses the space; the files rarely shrink)."""
        size = "SELECT " + " + ".join(f"pg_total_relation_size('{t}')" for t in TABLES)
        [(before,)] = self._rows(size)
        with self.saver.lock:
            self.conn.execute(f"VACUUM (ANALYZE) {', '.join(TABLES)}")
        [(after,)] = self._rows(size)
        return SpaceReport(
            before,
            after,
            note="PostgreSQL reuses freed space for new checkpoints; VACUUM FULL (run by an "
            "administrator, it locks the tables) returns it to the operating system",
        )


def _one_row(cur: psycopg.Cursor[tuple[Any, ...]]) -> tuple[Any, ...]:
    """The row of an aggregate without GROUP BY: there is always exactly one."""
    row = cur.fetchone()
    assert row is not None
    return row
