"""The SQLite backend: open the file (WAL, busy timeout, refuse what is not ours), Waypoint's own SQL
over SqliteSaver's `checkpoints`/`writes` tables, and per-thread flock files next to the database."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.db.base import (
    SAVE_THREAD_INFO,
    THREAD_INFO_DDL,
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
from app.db.base import CheckpointRecord as Record
from app.db.crons import CRONS_SETUP
from app.db.location import DatabaseLocation
from app.db.raw import decode
from app.db.run_records import RUNS_DDL, RunTable, Statements
from app.db.sqlite_lock import dead_writer, lock_dir
from app.db.unreadable import SHAPE_ERRORS
from app.errors import ConfigError
from app.text import plural
from tools.sqlite_wal import use_wal

if TYPE_CHECKING:
    from langgraph.checkpoint.sqlite import SqliteSaver

CHECKPOINT_BYTES = "IFNULL(LENGTH(checkpoint), 0) + IFNULL(LENGTH(CAST(metadata AS BLOB)), 0)"
WRITE_BYTES = "IFNULL(LENGTH(value), 0)"
LIST_THREADS_SQL = """
SELECT thread_id,
       COUNT(*) AS checkpoints,
       MAX(checkpoint_id) AS last_checkpoint,
       -- the head's turn (after a rollback, fewer than the highest ever): with exactly one
       -- max() in the query, SQLite takes bare columns from the row that has that max. A
       -- rollback's copy stores no turn: it has its parent's.
       COALESCE(
         CAST(json_extract(CAST(metadata AS TEXT), '$.turn') AS INTEGER),
         (SELECT CAST(json_extract(CAST(parent.metadata AS TEXT), '$.turn') AS INTEGER)
            FROM checkpoints AS parent
           WHERE parent.thread_id = c.thread_id AND parent.checkpoint_ns = ''
             AND parent.checkpoint_id = c.parent_checkpoint_id)
       ) AS turns,
       (SELECT json_extract(CAST(first.metadata AS TEXT), '$.preview') FROM checkpoints AS first
         WHERE first.thread_id = c.thread_id AND first.checkpoint_ns = ''
           AND json_extract(CAST(first.metadata AS TEXT), '$.preview') <> ''
         ORDER BY first.checkpoint_id LIMIT 1) AS title
FROM checkpoints AS c
WHERE checkpoint_ns = ''
GROUP BY thread_id
ORDER BY last_checkpoint DESC
"""
# Grouping each table first walks its primary-key index in thread order (no temporary b-tree over all
# rows): ~0.5 s for 1,000 threads of 60 turns (1.6 M rows, 1.1 GB).
THREAD_SIZES_SQL = f"""
SELECT thread_id, SUM(bytes) FROM (
    SELECT thread_id, SUM({CHECKPOINT_BYTES}) AS bytes FROM checkpoints GROUP BY thread_id
    UNION ALL
    SELECT thread_id, SUM({WRITE_BYTES}) FROM writes GROUP BY thread_id
)
GROUP BY thread_id
"""
# SqliteSaver's tables (its columns, its primary keys), created here so that the listings need not
# load LangGraph: `SqliteSaver.setup()` then finds them. Both are WITHOUT ROWID: their rows live in
# one b-tree ordered by their key, where SqliteSaver's tables add a second b-tree, an index repeating
# every row's key (about 100 bytes of a write's 250, 130 of a checkpoint's 700; a turn writes some
# 20 writes and 6 checkpoints), and a thread's checkpoints lie together in key order. A database
# made before keeps the tables it has.
TABLES = """
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint BLOB,
    metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
) WITHOUT ROWID;
"""
ROOT = "thread_id = ? AND checkpoint_ns = ''"
# The database's clock in seconds since the epoch (for run leases).
SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
BY_ID = f"WHERE {ROOT} AND checkpoint_id = ?"


@contextlib.contextmanager
def open_sqlite(location: DatabaseLocation, busy_timeout: float) -> Iterator[SqliteDatabase]:
    """The database in the file; a damaged or unusable file is an error, never overwritten."""
    path = location.path
    assert path is not None
    connection = connect(path, busy_timeout)
    try:
        try:
            create_tables(connection)
        except sqlite3.DatabaseError as exc:
            raise database_error(path, exc) from exc
        try:
            yield SqliteDatabase(location, connection)
        except sqlite3.DatabaseError as exc:
            # The one boundary for what the file does after it was opened (damaged, full, locked,
            # read-only) during any command; a misused API (ProgrammingError…) stays a bug.
            if not is_environmental(exc):
                raise
            raise database_error(path, exc) from exc
    finally:
        connection.close()


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    check_file(path)
    try:
        connection = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False)
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        use_wal(connection, busy_timeout)
        connection.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        raise database_error(path, exc) from exc
    return connection


def create_tables(connection: sqlite3.Connection) -> None:
    connection.executescript(TABLES)
    for statement in RUNS_DDL:  # the HTTP server's run records (app/db/run_records.py)
        try:
            connection.execute(statement)
        except sqlite3.OperationalError as exc:
            if "readonly database" not in str(exc):
                raise
    # SqliteSaver's own migration, as its setup() does it: databases from before `task_path`.
    try:
        connection.execute("ALTER TABLE writes ADD COLUMN task_path TEXT NOT NULL DEFAULT ''")
    except sqlite3.OperationalError as exc:
        if "duplicate column name" not in str(exc) and "readonly database" not in str(exc):
            raise


def check_file(path: Path) -> None:
    """Create a new file private (0600); leave an existing one to SQLite, which refuses a file that
    is not a database (SQLITE_NOTADB) without writing to it.

    The file is never opened here once it exists: closing any descriptor of a file drops every
    POSIX lock this process holds on it, including the one SQLite keeps for a WAL connection, and a
    peer process would then delete the -wal/-shm files under our feet (RELIABILITY.md)."""
    try:
        if path.is_dir():
            raise ConfigError(f"database path {path} is a directory; pass a file path with --db")
        if path.exists():
            if not path.is_file():  # a device or FIFO: SQLite would write a journal beside it
                raise ConfigError(
                    f"database path {path} is not a regular file; pass a file path with --db"
                )
            return
    except OSError as exc:  # a name too long, a loop of symlinks, no permission to look
        raise ConfigError(f"cannot use the database {path}: {exc.strerror}") from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL: only a file this call created is opened (and closed), and no connection of this
        # process can hold a lock on a file that did not exist.
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot create the database {path}: {exc.strerror}") from exc


# SQLite's primary result codes (the low byte of `sqlite_errorcode`).
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR = 3, 5, 6, 8, 10
SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 11, 13, 14, 26


def is_environmental(exc: sqlite3.DatabaseError) -> bool:
    """Raised by the file or its surroundings (corrupt, full, locked, unopenable), not by a bug."""
    return type(exc) in (sqlite3.DatabaseError, sqlite3.OperationalError)


def database_error(path: Path, exc: sqlite3.Error) -> ConfigError:
    """The clear message for what SQLite reported about the database at `path`. SQLite says only
    "unable to open database file" or "disk I/O error" for a read-only or full file system, so
    those are told apart by looking at the file system."""
    text = str(exc)
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == SQLITE_FULL or (code == SQLITE_IOERR and _disk_full(path)):
        return ConfigError(
            f"the disk holding the database {path} is full ({text}); free space and retry. "
            "Nothing was lost: every step saved before this one is still there"
        )
    read_only = _read_only(path) if code in (SQLITE_CANTOPEN, SQLITE_IOERR, SQLITE_PERM) else None
    if code == SQLITE_READONLY or read_only or "readonly" in text or "read-only" in text:
        return ConfigError(
            f"the database {path} is read-only ({read_only or text}); Waypoint writes to the "
            "file and its directory even to read it (WAL): make them writable or use --db"
        )
    if code in (SQLITE_BUSY, SQLITE_LOCKED) or "locked" in text or "busy" in text:
        return ConfigError(f"the database {path} is locked by another process; try again")
    if code == SQLITE_NOTADB or "not a database" in text:
        return ConfigError(
            f"{path} is not a Waypoint database (not SQLite, or damaged); it was left untouched. "
            "Pass another file with --db or APP_DB"
        )
    if code == SQLITE_CORRUPT or "malformed" in text:
        return ConfigError(
            f"the database {path} is damaged ({text}); it was left untouched. "
            "Restore a backup or pass another file with --db"
        )
    return ConfigError(f"cannot use the database {path}: {text}")


def _read_only(path: Path) -> str | None:
    """Why the database cannot be written, if the file system says so. Never opens the file (see
    check_file)."""
    try:
        if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        return None
    for target, what in ((path, "the file"), (path.parent, "its directory")):
        if target.exists() and not os.access(target, os.W_OK):
            return f"{what} is not writable"
    return None


def _disk_full(path: Path) -> bool:
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False


@functools.cache
def checked_saver_class() -> type[SqliteSaver]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from app.db import sqlite_delta
    from app.db.fence import FencedWrites
    from app.db.sqlite_delta import Loaded, delta_history
    from app.db.strict import CheckedReads, reading

    class CheckedSqliteSaver(FencedWrites, CheckedReads, SqliteSaver):
        """SqliteSaver whose reads refuse tampered or damaged data (app/db/strict.py), whose
        DeltaChannel histories are decoded once per stored blob and read on from the last load
        (app/db/sqlite_delta.py), and whose writes end with their run (app/db/fence.py)."""

        @functools.cached_property
        def loaded_histories(self) -> Loaded:
            return Loaded()

        def get_delta_channel_history(self, *, config, channels):
            if not sqlite_delta.AVAILABLE:
                return super().get_delta_channel_history(config=config, channels=channels)
            with reading(config):
                return delta_history(self, config, channels, self.loaded_histories)

    return CheckedSqliteSaver


class SqliteDatabase(Database):
    """Waypoint's SQL on one connection; the saver on the same connection, under the same lock,
    made when first asked for (LangGraph is imported then, not by the listings)."""

    kind = "sqlite"

    def __init__(self, location: DatabaseLocation, connection: sqlite3.Connection) -> None:
        super().__init__(location)
        self.connection = connection
        self.lock = threading.Lock()

    @functools.cached_property
    def saver(self) -> SqliteSaver:
        saver = checked_saver_class()(self.connection, serde=checkpoint_serializer())
        saver.lock = self.lock  # one lock for the one connection
        saver.setup()
        return saver

    @property
    def path(self) -> Path:
        assert self.location.path is not None
        return self.location.path

    def _rows(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        with self.lock:
            return self.connection.execute(sql, params).fetchall()

    def thread_rows(self) -> list[ThreadRow]:
        return [ThreadRow(*row) for row in self._rows(LIST_THREADS_SQL)]

    def thread_sizes(self) -> dict[str, int]:
        return dict(self._rows(THREAD_SIZES_SQL))

    def thread_exists(self, thread_id: str) -> bool:
        return bool(
            self._rows("SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,))
        )

    def checkpoint_records(self, thread_id: str) -> list[Record]:
        rows = self._rows(
            "SELECT checkpoint_id, parent_checkpoint_id, CAST(metadata AS TEXT) FROM checkpoints "
            f"WHERE {ROOT} ORDER BY checkpoint_id",
            (thread_id,),
        )
        return [
            Record(cid, parent, checked_metadata(json_object(meta))) for cid, parent, meta in rows
        ]

    def writer_paths(self, thread_id: str) -> list[tuple[str, str]]:
        return self._rows(
            f"SELECT checkpoint_id, task_path FROM writes WHERE {ROOT} "
            "GROUP BY checkpoint_id, task_path",
            (thread_id,),
        )

    def write_order(self, thread_id: str) -> list[tuple[str, str, str, str, int]]:
        try:
            return self._rows(
                f"SELECT checkpoint_id, task_id, channel, task_path, idx FROM writes WHERE {ROOT}",
                (thread_id,),
            )
        except sqlite3.OperationalError:  # an old database without the task_path column
            return []

    def thread_heads(self) -> list[tuple[str, str, bool]]:
        rows = self._rows(
            "SELECT thread_id, MAX(checkpoint_id), MAX(checkpoint_ns != '') FROM checkpoints "
            "GROUP BY thread_id ORDER BY thread_id"
        )
        return [(thread, last, bool(sub)) for thread, last, sub in rows]

    def delta_reader(
        self, thread_id: str, channels: Collection[str]
    ) -> Callable[[str], DeltaChannels]:
        wanted = frozenset(channels)

        def read(checkpoint_id: str) -> DeltaChannels:
            [(type_tag, blob)] = self._rows(
                f"SELECT type, checkpoint FROM checkpoints {BY_ID}", (thread_id, checkpoint_id)
            )
            try:
                checkpoint = self.saver.serde.loads_typed((type_tag, blob))
                # A `_DeltaSnapshot` (or a pre-delta plain value) ends the walk, as in LangGraph.
                return (
                    frozenset(checkpoint["channel_versions"]) & wanted,
                    frozenset(checkpoint["channel_values"]) & wanted,
                )
            except SHAPE_ERRORS as exc:
                raise UnreadableCheckpointError(str(exc), thread_id, checkpoint_id) from exc

        return read

    @functools.cached_property
    def runs(self) -> RunTable:
        return RunTable(self._statements, SQLITE_NOW)

    @contextlib.contextmanager
    def _statements(self, write: bool) -> Iterator[Statements]:
        with self._transaction(write=write) as conn:
            yield lambda sql, params=(): conn.execute(sql, params).fetchall()

    def thread_infos(self) -> dict[str, ThreadInfo]:
        if not self._rows("SELECT 1 FROM sqlite_master WHERE name = 'waypoint_threads'"):
            return {}
        rows = self._rows(
            "SELECT thread_id, metadata, created_at, updated_at FROM waypoint_threads"
        )
        return {row[0]: ThreadInfo(row[0], json_object(row[1]), row[2], row[3]) for row in rows}

    def save_thread_info(self, thread_id: str, metadata: dict[str, Any], now: str) -> ThreadInfo:
        with self._transaction(write=True) as conn:
            conn.execute(THREAD_INFO_DDL)
            values = (thread_id, json.dumps(metadata), now, now)
            conn.execute(SAVE_THREAD_INFO.replace("%s", "?"), values)
            row = conn.execute(
                "SELECT created_at FROM waypoint_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        return ThreadInfo(thread_id, metadata, row[0], now)

    def forget_thread_info(self, thread_id: str) -> None:
        if self.thread_infos().get(thread_id) is not None:
            with self._transaction(write=True) as conn:
                conn.execute("DELETE FROM waypoint_threads WHERE thread_id = ?", (thread_id,))
        self.runs.forget_thread(thread_id)

    def _cron_sql(self, sql: str, params: tuple = (), *, write: bool) -> tuple[list[tuple], int]:
        if not write and not self._rows(
            "SELECT 1 FROM sqlite_master WHERE name = 'waypoint_crons'"
        ):
            return [], 0
        with self._transaction(write=write) as conn:
            if write:
                for statement in CRONS_SETUP:
                    conn.execute(statement)
            cursor = conn.execute(sql.replace("%s", "?"), params)
            return cursor.fetchall(), cursor.rowcount

    def stored_checkpoints(self, thread_id: str, checkpoint_ids: Collection[str]) -> dict[str, Any]:
        found = {}
        for ids in chunks(checkpoint_ids):
            sql = f"SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE {ROOT} AND checkpoint_id IN ({marks(ids)})"
            for checkpoint_id, type_, blob in self._rows(sql, (thread_id, *ids)):
                found[checkpoint_id] = _decoded(thread_id, checkpoint_id, type_, blob)
        return found

    def stored_writes(
        self, thread_id: str, checkpoint_ids: Collection[str], channel: str | None = None
    ) -> dict[str, list[StoredWrite]]:
        found: dict[str, list[StoredWrite]] = {}
        for ids in chunks(checkpoint_ids):
            sql = (
                "SELECT checkpoint_id, task_path, task_id, idx, channel, type, value FROM writes "
                f"WHERE {ROOT} AND checkpoint_id IN ({marks(ids)})"
                + (" AND channel = ?" if channel is not None else "")
                + " ORDER BY checkpoint_id, task_path, task_id, idx"
            )
            params = (thread_id, *ids, *([channel] if channel is not None else []))
            for checkpoint_id, path, task, idx, name, type_, blob in self._rows(sql, params):
                value = _decoded(thread_id, checkpoint_id, type_, blob)
                found.setdefault(checkpoint_id, []).append(
                    StoredWrite(path, task, idx, name, value)
                )
        return found

    def health(self) -> Health:
        try:
            verdict = self._rows("PRAGMA quick_check")[0][0]
            mode = self._rows("PRAGMA journal_mode")[0][0]
            threads = self._rows("SELECT COUNT(DISTINCT thread_id) FROM checkpoints")[0][0]
        except sqlite3.Error as exc:
            return Health(False, str(database_error(self.path, exc)))
        size = self.path.stat().st_size
        detail = f"{plural(threads, 'thread')}, {size:,} bytes, journal {mode}, integrity {verdict}"
        return Health(verdict == "ok", detail)

    def dead_writers(self) -> dict[str, str]:
        directory = lock_dir(self.path)
        names = sorted(p.stem for p in directory.glob("*.lock")) if directory.is_dir() else []
        return {
            name: str(pid) for name in names if (pid := dead_writer(self.path, name)) is not None
        }

    def remove(self, thread_id: str, checkpoint_ids: list[str] | None, *, dry_run: bool) -> Removal:
        params: list[tuple[str, ...]]
        if checkpoint_ids is None:  # a whole thread goes with its subgraph namespaces too
            where, params = "thread_id = ?", [(thread_id,)]
        else:
            where = f"{ROOT} AND checkpoint_id = ?"
            params = [(thread_id, cid) for cid in checkpoint_ids]
        try:
            with self._transaction(write=not dry_run) as conn:
                removal = self._measure(conn, where, params)
                if not dry_run:
                    checkpoints = conn.executemany(f"DELETE FROM checkpoints WHERE {where}", params)
                    writes = conn.executemany(f"DELETE FROM writes WHERE {where}", params)
                    removal = Removal(checkpoints.rowcount, writes.rowcount, removal.bytes)
        except sqlite3.OperationalError as exc:
            raise database_error(self.path, exc) from exc
        return removal

    @staticmethod
    def _measure(conn: sqlite3.Connection, where: str, params: list[tuple]) -> Removal:
        checkpoints = writes = size = 0
        for param in params:
            count, nbytes = conn.execute(
                f"SELECT COUNT(*), IFNULL(SUM({CHECKPOINT_BYTES}), 0) FROM checkpoints WHERE {where}",
                param,
            ).fetchone()
            wcount, wbytes = conn.execute(
                f"SELECT COUNT(*), IFNULL(SUM({WRITE_BYTES}), 0) FROM writes WHERE {where}", param
            ).fetchone()
            checkpoints, writes, size = checkpoints + count, writes + wcount, size + nbytes + wbytes
        return Removal(checkpoints, writes, size)

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """Take the write lock now (BEGIN IMMEDIATE) and commit everything or nothing."""
        conn = self.connection
        with self.lock:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    def reclaim_space(self) -> SpaceReport:
        """Fold the WAL in and rebuild the file so that freed pages return to the disk."""
        before = self._file_bytes()
        try:
            with self.lock:
                self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self.connection.execute("VACUUM")
                # In WAL mode VACUUM writes the rebuilt pages to the WAL; fold them in now.
                self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.OperationalError as exc:
            raise database_error(self.path, exc) from exc
        return SpaceReport(before, self._file_bytes())

    def _file_bytes(self) -> int:
        paths = (self.path, self.path.with_name(self.path.name + "-wal"))
        return sum(path.stat().st_size for path in paths if path.exists())


def _decoded(thread_id: str, checkpoint_id: str, type_: str, blob: bytes) -> Any:
    try:
        return decode(type_, blob)
    except UnreadableCheckpointError as exc:
        exc.thread_id, exc.checkpoint_id = thread_id, checkpoint_id
        raise


def chunks(ids: Collection[str], size: int = 500) -> Iterator[list[str]]:
    """The ids in groups SQLite takes as parameters of one statement."""
    ordered = list(ids)
    for start in range(0, len(ordered), size):
        yield ordered[start : start + size]


def marks(ids: list[str]) -> str:
    return ", ".join("?" * len(ids))
