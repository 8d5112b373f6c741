"""Serve's runs as records next to the threads (app/db/run_records.py): stored, listed, pruned,
leased, taken over exactly once, and gone with their thread; on SQLite and PostgreSQL."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from app.db import open_database, pg_setup
from app.db.run_records import RunRecord
from app.service import api
from tests.conftest import run_cli


def record(run_id: str, thread: str = "t1", *, at: str = "", owner: str = "server-a") -> RunRecord:
    created = at or f"2026-06-15T10:30:{int(run_id[-3:]) % 60:02d}.{int(run_id[-3:]):06d}+00:00"
    return RunRecord(run_id, thread, "waypoint", "pending", created, created, owner=owner)


def test_a_run_is_stored_updated_listed_newest_first_and_deleted(database: str):
    with open_database(database) as db:
        db.runs.add(record("run-001", at="2026-06-15T10:00:00.000000+00:00"), lease_seconds=30)
        db.runs.add(record("run-002", at="2026-06-15T10:00:01.000000+00:00"), lease_seconds=30)
        assert db.runs.update(
            "run-001", "server-a", "2026-06-15T10:00:05.000000+00:00", status="running"
        )
        assert not db.runs.update("run-001", "server-b", "later", status="error")  # not its owner
        error = {"error": "AppError", "message": "boom"}
        db.runs.finish(
            "run-001",
            "server-a",
            "2026-06-15T10:00:09.000000+00:00",
            status="error",
            error=error,
            output_checkpoint="ck-1",
        )

    with open_database(database) as db:  # another connection, as another server would read it
        first = db.runs.get("t1", "run-001")
        assert first is not None and first.status == "error" and first.error == error
        assert first.output_checkpoint == "ck-1" and first.owner is None and not first.active
        assert first.updated_at == "2026-06-15T10:00:09.000000+00:00"
        assert db.runs.get("other-thread", "run-001") is None
        assert [r.run_id for r in db.runs.of_thread("t1")] == ["run-002", "run-001"]
        assert [r.run_id for r in db.runs.of_thread("t1", status="error")] == ["run-001"]
        assert [r.run_id for r in db.runs.of_thread("t1", limit=1, offset=1)] == ["run-001"]
        assert [r.run_id for r in db.runs.active("t1")] == ["run-002"]
        assert db.runs.delete("t1", "run-001") and not db.runs.delete("t1", "run-001")
        assert db.runs.get("t1", "run-001") is None


def test_a_thread_keeps_its_newest_runs_and_never_prunes_a_live_one(database: str):
    with open_database(database) as db:
        db.runs.add(record("run-000"), lease_seconds=30)  # still pending: never pruned
        for n in range(1, 8):
            db.runs.add(record(f"run-{n:03d}"), lease_seconds=30)
            db.runs.finish(f"run-{n:03d}", "server-a", "now", status="success")
        db.runs.add(record("run-008"), lease_seconds=30, kept=3)
        kept = [r.run_id for r in db.runs.of_thread("t1", limit=100)]
    assert kept == ["run-008", "run-007", "run-006", "run-000"]


def test_deleting_a_thread_removes_its_runs(database: str):
    with open_database(database) as db:
        api.create_thread(db, "t1")
        api.create_thread(db, "t2")
        db.runs.add(record("run-001", "t1"), lease_seconds=30)
        db.runs.add(record("run-002", "t2"), lease_seconds=30)
        api.delete_thread(db, "t1")
        assert db.runs.get("t1", "run-001") is None
        assert db.runs.get("t2", "run-002") is not None


def test_a_lapsed_lease_is_claimed_by_exactly_one_of_many_claimers(database: str):
    with open_database(database) as db:
        db.runs.add(record("run-001"), lease_seconds=-1)  # its owner stopped renewing
        db.runs.add(record("run-002"), lease_seconds=3600)  # its owner is alive
        db.runs.add(record("run-003"), lease_seconds=-1)
        db.runs.finish("run-003", "server-a", "now", status="success")  # ended: nothing to take

    def claim(n: int) -> list[str]:
        with open_database(database) as db:
            return [r.run_id for r in db.runs.claim_expired(f"server-{n}", 30)]

    with ThreadPoolExecutor(max_workers=6) as pool:
        claims = list(pool.map(claim, range(6)))
    assert sorted(run for found in claims for run in found) == ["run-001"]
    winner = next(n for n, found in enumerate(claims) if found)
    with open_database(database) as db:
        taken = db.runs.get("t1", "run-001")
        assert taken is not None and taken.owner == f"server-{winner}" and taken.active
        assert [r.run_id for r in db.runs.active("t1")] == ["run-001", "run-002"]


def test_renewing_keeps_a_lease_and_reports_cancels_asked_through_any_server(database: str):
    with open_database(database) as db:
        db.runs.add(record("run-001"), lease_seconds=-1)
        db.runs.add(record("run-002", owner="server-b"), lease_seconds=-1)
        assert db.runs.request_cancel("t1", "run-001")
        assert db.runs.renew("server-a", 3600) == ["run-001"]
        assert [r.run_id for r in db.runs.claim_expired("server-c", 30)] == ["run-002"]
        db.runs.finish("run-001", "server-a", "now", status="interrupted")
        assert not db.runs.request_cancel("t1", "run-001")  # it has ended


def test_an_earlier_database_gets_the_runs_table_and_keeps_its_threads(
    database: str, monkeypatch: pytest.MonkeyPatch
):
    assert run_cli("chat", "--db", database, "-t", "old", "-m", "what is 2 plus 3").returncode == 0
    with open_database(database) as db:  # as a database from before run records
        if db.kind == "sqlite":
            db.connection.execute("DROP TABLE waypoint_runs")
        else:
            db.conn.execute("DROP TABLE waypoint_runs")
    monkeypatch.setattr(pg_setup, "_MIGRATED", set())  # a new process: migrations run again
    with open_database(database) as db:
        assert db.runs.of_thread("old") == []
        db.runs.add(record("run-001", "old"), lease_seconds=30)
        assert [r.thread_id for r in db.thread_rows()] == ["old"]
        assert db.runs.get("old", "run-001") is not None


def test_a_started_run_notes_the_head_it_started_from_once(database: str):
    with open_database(database) as db:
        db.runs.add(record("run-001", "fresh"), lease_seconds=30)
        db.runs.start("run-001", "server-a", "2026-06-15T10:30:01.000000+00:00")
        started = db.runs.get("fresh", "run-001")
        assert started is not None and started.status == "running"
        assert started.head_before == "" == db.runs.head_id("fresh")  # no checkpoint yet
        db.runs.start("run-001", "server-a", "2026-06-15T10:30:02.000000+00:00")  # taken over
        assert db.runs.get("fresh", "run-001").head_before == ""
