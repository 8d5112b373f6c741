"""Crons (LangGraph Server API) as rows of `waypoint_crons`, next to the threads they run on: the same
SQL on SQLite and PostgreSQL, over one statement primitive each backend gives (`_cron_sql`)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import astuple, dataclass, fields
from typing import Any

# Dates are ISO 8601 text in UTC with whole seconds ("2026-06-15T10:31:00+00:00"), so that text
# order is time order on both backends (see `instant` in app/server/standard/crons.py).
CRONS_DDL = (
    "CREATE TABLE IF NOT EXISTS waypoint_crons (cron_id TEXT PRIMARY KEY, "
    "assistant_id TEXT NOT NULL, thread_id TEXT, schedule TEXT NOT NULL, timezone TEXT, "
    "end_time TEXT, next_run_date TEXT, enabled INTEGER NOT NULL, on_run_completed TEXT, "
    "payload TEXT NOT NULL, metadata TEXT NOT NULL, user_id TEXT, "
    "created_at TEXT NOT NULL, updated_at TEXT NOT NULL)"
)
CRONS_INDEXES = (
    "CREATE INDEX IF NOT EXISTS waypoint_crons_due ON waypoint_crons (next_run_date)",
    "CREATE INDEX IF NOT EXISTS waypoint_crons_thread ON waypoint_crons (thread_id)",
)
CRONS_SETUP = (CRONS_DDL, *CRONS_INDEXES)


@dataclass(frozen=True)
class CronRecord:
    """One cron as stored: when it fires (schedule in its time zone, until end_time) and the run it
    starts (payload: the run's fields; a thread's cron runs on it, else each firing makes a thread)."""

    cron_id: str
    assistant_id: str
    thread_id: str | None
    schedule: str
    timezone: str | None
    end_time: str | None
    next_run_date: str | None
    enabled: bool
    on_run_completed: str | None
    payload: dict[str, Any]
    metadata: dict[str, Any]
    user_id: str | None
    created_at: str
    updated_at: str

    def as_row(self) -> tuple:
        return tuple(
            stored(name, value) for name, value in zip(COLUMNS, astuple(self), strict=True)
        )

    @classmethod
    def from_row(cls, row: tuple) -> CronRecord:
        values = dict(zip(COLUMNS, row, strict=True))
        values["enabled"] = bool(values["enabled"])
        values["payload"] = _json_object(values["payload"])
        values["metadata"] = _json_object(values["metadata"])
        return cls(**values)


COLUMNS = tuple(f.name for f in fields(CronRecord))
# What an update may set (never the id, the assistant, the thread or the creation time).
UPDATABLE = frozenset(COLUMNS) - {"cron_id", "assistant_id", "thread_id", "created_at"}
SELECT = f"SELECT {', '.join(COLUMNS)} FROM waypoint_crons"


class CronTable(ABC):
    """The crons of one database. Statements use %s placeholders (SQLite's backend turns them
    into ?); each runs in its own transaction."""

    @abstractmethod
    def _cron_sql(self, sql: str, params: tuple = (), *, write: bool) -> tuple[list[tuple], int]:
        """Run one statement on waypoint_crons (made first if needed); (rows, rows changed). A
        read on a database that has no crons table yet reads nothing and makes nothing."""

    def save_cron(self, cron: CronRecord) -> None:
        marks = ", ".join(["%s"] * len(COLUMNS))
        sql = f"INSERT INTO waypoint_crons ({', '.join(COLUMNS)}) VALUES ({marks})"
        self._cron_sql(sql, cron.as_row(), write=True)

    def cron(self, cron_id: str) -> CronRecord | None:
        rows, _ = self._cron_sql(f"{SELECT} WHERE cron_id = %s", (cron_id,), write=False)
        return CronRecord.from_row(rows[0]) if rows else None

    def crons(self) -> list[CronRecord]:
        """Every cron, the oldest first."""
        rows, _ = self._cron_sql(f"{SELECT} ORDER BY created_at, cron_id", write=False)
        return [CronRecord.from_row(row) for row in rows]

    def update_cron(self, cron_id: str, changes: dict[str, Any]) -> bool:
        """Set these columns of the cron (only these: a firing claimed meanwhile is kept);
        False if there is no such cron."""
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {', '.join(sorted(unknown))}")
        assignments = ", ".join(f"{name} = %s" for name in changes)
        params = (*(stored(name, value) for name, value in changes.items()), cron_id)
        _, changed = self._cron_sql(
            f"UPDATE waypoint_crons SET {assignments} WHERE cron_id = %s", params, write=True
        )
        return changed == 1

    def delete_cron(self, cron_id: str) -> bool:
        sql = "DELETE FROM waypoint_crons WHERE cron_id = %s"
        return self._cron_sql(sql, (cron_id,), write=True)[1] == 1

    def delete_thread_crons(self, thread_id: str) -> int:
        """Remove the crons of a thread that is being deleted; how many there were."""
        sql = "DELETE FROM waypoint_crons WHERE thread_id = %s"
        return self._cron_sql(sql, (thread_id,), write=True)[1]

    def due_crons(self, now: str) -> list[CronRecord]:
        """Enabled crons whose next run is at or before `now` and whose end is not before it."""
        sql = (
            f"{SELECT} WHERE enabled = 1 AND next_run_date <= %s "
            "AND (end_time IS NULL OR end_time >= %s) ORDER BY next_run_date, cron_id"
        )
        rows, _ = self._cron_sql(sql, (now, now), write=False)
        return [CronRecord.from_row(row) for row in rows]

    def claim_cron(self, cron_id: str, due: str, next_run: str) -> bool:
        """Move the cron's next run from `due` to `next_run`; True for the one caller (of any
        process) whose update changed the row: that caller, and only it, fires this run."""
        sql = (
            "UPDATE waypoint_crons SET next_run_date = %s WHERE cron_id = %s AND next_run_date = %s"
        )
        return self._cron_sql(sql, (next_run, cron_id, due), write=True)[1] == 1


def stored(column: str, value: Any) -> Any:
    """A field's value as its column holds it (JSON text, 0/1 for the flag)."""
    if column in ("payload", "metadata"):
        return json.dumps(value)
    return int(value) if column == "enabled" else value


def _json_object(text: str | None) -> dict:
    """A stored JSON object, or {} for anything else (a damaged value)."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
