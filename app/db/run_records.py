"""Serve's runs as rows of `waypoint_runs`, in the database of the threads (the same SQL on SQLite
and PostgreSQL): a run's record, the lease its process renews while it runs, and a bounded history
of each thread's runs (the newest RUNS_KEPT_PER_THREAD; all go with the thread)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

RUNS_KEPT_PER_THREAD = 100  # finished runs kept per thread; older ones are pruned as runs are added
ACTIVE = ("pending", "running")
IS_ACTIVE = "status IN ('pending', 'running')"

# Created on first use in existing databases too (IF NOT EXISTS): nothing else changes.
RUNS_DDL = (
    "CREATE TABLE IF NOT EXISTS waypoint_runs ("
    "run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, assistant_id TEXT NOT NULL, "
    "status TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
    "metadata TEXT NOT NULL, kwargs TEXT NOT NULL, multitask_strategy TEXT NOT NULL, "
    "error TEXT, output_checkpoint TEXT, head_before TEXT, owner TEXT, "
    "lease_expires DOUBLE PRECISION, cancel INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS waypoint_runs_by_thread ON waypoint_runs (thread_id, created_at)",
    "CREATE INDEX IF NOT EXISTS waypoint_runs_by_status ON waypoint_runs (status)",
)
COLUMNS = (
    "run_id, thread_id, assistant_id, status, created_at, updated_at, metadata, kwargs, "
    "multitask_strategy, error, output_checkpoint, head_before, owner, lease_expires, cancel"
)
NEWEST_FIRST = "ORDER BY created_at DESC, run_id DESC"


class Statements(Protocol):
    """Runs one statement (`?` marks its parameters) in the open transaction; its rows."""

    def __call__(self, sql: str, params: tuple = ()) -> list[tuple]: ...


Transaction = Callable[[bool], AbstractContextManager[Statements]]


@dataclass(frozen=True)
class RunRecord:
    """One run as stored. `owner` is the token of the process running it, whose lease ends at
    `lease_expires` (seconds since the epoch, by the database's clock) unless it renews it."""

    run_id: str
    thread_id: str
    assistant_id: str
    status: str
    created_at: str
    updated_at: str
    metadata: dict = field(default_factory=dict)
    kwargs: dict = field(default_factory=dict)
    multitask_strategy: str = "enqueue"
    error: dict | None = None
    output_checkpoint: str | None = None
    head_before: str | None = None
    owner: str | None = None
    lease_expires: float | None = None
    cancel: bool = False

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def as_json(self) -> dict:
        """The run as the LangGraph Server API shows it."""
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "status": self.status,
            "metadata": self.metadata,
            "kwargs": self.kwargs,
            "multitask_strategy": self.multitask_strategy,
        }


def json_object(text: str | None) -> dict:
    """A stored JSON object, or {} for anything else (a damaged or foreign value)."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _record(row: tuple) -> RunRecord:
    (run_id, thread, assistant, status, created, updated, metadata, kwargs, strategy) = row[:9]
    error, output, head_before, owner, lease, cancel = row[9:]
    return RunRecord(
        run_id,
        thread,
        assistant,
        status,
        created,
        updated,
        json_object(metadata),
        json_object(kwargs),
        strategy,
        json_object(error) if error else None,
        output,
        head_before,
        owner,
        float(lease) if lease is not None else None,
        bool(cancel),
    )


@dataclass(frozen=True)
class RunTable:
    """The run records of one open database. `transaction(write)` runs statements in one
    transaction; `now` is the SQL of the database's clock in seconds (one clock for every server
    that shares the database, so leases compare on any machine)."""

    transaction: Transaction
    now: str

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.transaction(False) as run:
            return run(sql.replace("{now}", self.now), params)

    def _write(self, *statements: tuple[str, tuple]) -> list[list[tuple]]:
        with self.transaction(True) as run:
            return [run(sql.replace("{now}", self.now), params) for sql, params in statements]

    # reads ----------------------------------------------------------------------------------------

    def get(self, thread_id: str, run_id: str) -> RunRecord | None:
        rows = self._rows(
            f"SELECT {COLUMNS} FROM waypoint_runs WHERE run_id = ? AND thread_id = ?",
            (run_id, thread_id),
        )
        return _record(rows[0]) if rows else None

    def of_thread(
        self, thread_id: str, *, limit: int = 10, offset: int = 0, status: str | None = None
    ) -> list[RunRecord]:
        """The thread's runs, newest first."""
        where = "thread_id = ?" + (" AND status = ?" if status is not None else "")
        params = (thread_id, *([status] if status is not None else []), limit, offset)
        sql = f"SELECT {COLUMNS} FROM waypoint_runs WHERE {where} {NEWEST_FIRST} LIMIT ? OFFSET ?"
        return [_record(row) for row in self._rows(sql, params)]

    def active(self, thread_id: str, *, before: RunRecord | None = None) -> list[RunRecord]:
        """The thread's pending or running runs whose process is alive (its lease holds), oldest
        first; with `before`, only those made before that run."""
        sql = (
            f"SELECT {COLUMNS} FROM waypoint_runs WHERE thread_id = ? AND {IS_ACTIVE} "
            "AND lease_expires > {now}"
        )
        params: tuple = (thread_id,)
        if before is not None:
            sql += " AND (created_at < ? OR (created_at = ? AND run_id < ?))"
            params += (before.created_at, before.created_at, before.run_id)
        rows = self._rows(sql + " ORDER BY created_at, run_id", params)
        return [_record(row) for row in rows]

    def head_id(self, thread_id: str) -> str:
        """The id of the thread's newest root checkpoint (its head); "" when it has none."""
        rows = self._rows(
            "SELECT COALESCE(MAX(checkpoint_id), '') FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ''",
            (thread_id,),
        )
        return rows[0][0] if rows else ""

    # writes ---------------------------------------------------------------------------------------

    def add(
        self, record: RunRecord, lease_seconds: float, kept: int = RUNS_KEPT_PER_THREAD
    ) -> None:
        """Store a new run, leased to its owner; prune the thread's finished runs to `kept`."""
        values = (
            record.run_id,
            record.thread_id,
            record.assistant_id,
            record.status,
            record.created_at,
            record.updated_at,
            json.dumps(record.metadata),
            json.dumps(record.kwargs),
            record.multitask_strategy,
            record.owner,
            lease_seconds,
        )
        insert = (
            "INSERT INTO waypoint_runs (run_id, thread_id, assistant_id, status, created_at, "
            "updated_at, metadata, kwargs, multitask_strategy, owner, lease_expires) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {now} + ?)"
        )
        prune = (
            f"DELETE FROM waypoint_runs WHERE thread_id = ? AND NOT {IS_ACTIVE} AND run_id NOT IN "
            f"(SELECT run_id FROM waypoint_runs WHERE thread_id = ? {NEWEST_FIRST} LIMIT ?)"
        )
        self._write((insert, values), (prune, (record.thread_id, record.thread_id, kept)))

    def update(self, run_id: str, holder: str, at: str, **fields: Any) -> bool:
        """Set `fields` (status, error, output_checkpoint, head_before, owner, lease_expires) of a
        run that `holder` holds, changed `at`; False when it no longer holds it (another process
        took it over)."""
        names = sorted(fields)
        values = tuple(
            json.dumps(fields[n]) if n == "error" and fields[n] is not None else fields[n]
            for n in names
        )
        assignments = ", ".join(f"{name} = ?" for name in [*names, "updated_at"])
        sql = f"UPDATE waypoint_runs SET {assignments} WHERE run_id = ? AND owner = ? RETURNING 1"
        [rows] = self._write((sql, (*values, at, run_id, holder)))
        return bool(rows)

    def start(self, run_id: str, holder: str, at: str) -> None:
        """The run starts its turn: `running`, and, the first time, the thread's head then ("" for
        a thread without checkpoints), which a server taking the run over compares."""
        head = (
            "(SELECT COALESCE(MAX(checkpoint_id), '') FROM checkpoints "
            "WHERE thread_id = waypoint_runs.thread_id AND checkpoint_ns = '')"
        )
        sql = (
            f"UPDATE waypoint_runs SET status = 'running', updated_at = ?, "
            f"head_before = COALESCE(head_before, {head}) WHERE run_id = ? AND owner = ?"
        )
        self._write((sql, (at, run_id, holder)))

    def finish(self, run_id: str, holder: str, at: str, **fields: Any) -> bool:
        """Record how the run ended, and end its lease."""
        return self.update(run_id, holder, at, **fields, owner=None, lease_expires=None)

    def renew(self, owner: str, lease_seconds: float) -> list[str]:
        """Extend the leases of this owner's active runs; the ids of those a client asked (from
        any process) to cancel."""
        renew = (
            f"UPDATE waypoint_runs SET lease_expires = {{now}} + ? WHERE owner = ? AND {IS_ACTIVE}",
            (lease_seconds, owner),
        )
        cancelled = (
            f"SELECT run_id FROM waypoint_runs WHERE owner = ? AND cancel <> 0 AND {IS_ACTIVE}",
            (owner,),
        )
        return [row[0] for row in self._write(renew, cancelled)[1]]

    def request_cancel(self, thread_id: str, run_id: str) -> bool:
        """Ask the process running this run to stop it (it sees the request when it renews)."""
        sql = (
            f"UPDATE waypoint_runs SET cancel = 1 WHERE run_id = ? AND thread_id = ? AND {IS_ACTIVE} "
            "RETURNING 1"
        )
        return bool(self._write((sql, (run_id, thread_id)))[0])

    def claim_expired(self, owner: str, lease_seconds: float) -> list[RunRecord]:
        """Take over every pending or running run whose lease ran out (its process died), in one
        statement: of two processes claiming at once, each run goes to exactly one."""
        sql = (
            "UPDATE waypoint_runs SET owner = ?, lease_expires = {now} + ? "
            f"WHERE {IS_ACTIVE} AND lease_expires <= {{now}} RETURNING {COLUMNS}"
        )
        [rows] = self._write((sql, (owner, lease_seconds)))
        return sorted((_record(row) for row in rows), key=lambda r: (r.created_at, r.run_id))

    def release(self, run_id: str, owner: str, retry_in: float) -> None:
        """Give back a claimed run for another try in `retry_in` seconds (its thread was busy)."""
        sql = (
            "UPDATE waypoint_runs SET owner = NULL, lease_expires = {now} + ? "
            "WHERE run_id = ? AND owner = ?"
        )
        self._write((sql, (retry_in, run_id, owner)))

    def delete(self, thread_id: str, run_id: str) -> bool:
        sql = "DELETE FROM waypoint_runs WHERE run_id = ? AND thread_id = ? RETURNING 1"
        return bool(self._write((sql, (run_id, thread_id)))[0])

    def forget_thread(self, thread_id: str) -> None:
        self._write(("DELETE FROM waypoint_runs WHERE thread_id = ?", (thread_id,)))
