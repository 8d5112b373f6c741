"""SQLite keeps its POSIX locks for as long as Waypoint's connections are open, so a peer process that
exits never deletes the WAL under a writer (RELIABILITY.md, "Found in the second round")."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from app.config import load_settings
from app.db import open_database
from app.db.sqlite import connect
from app.service.memory import open_memory
from tests.conftest import REPO


def posix_lock_holders(path: Path) -> set[int]:
    """The pids holding a POSIX (fcntl) lock on the file, read from /proc/locks."""
    stat = os.stat(path)
    inode = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    holders = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        # "1: POSIX  ADVISORY  READ 1234 08:01:5678 128 128" (blocked waiters carry a "->")
        if "->" not in fields and fields[1] == "POSIX" and fields[5] == inode:
            holders.add(int(fields[4]))
    return holders


def test_two_connections_in_one_process_keep_sqlite_lock_on_the_database(db_path: Path):
    settings = load_settings(db=db_path)
    with open_database(db_path) as database, open_memory(settings):
        database.thread_rows()  # a read: the checkpoint connection now holds its WAL read lock
        assert os.getpid() in posix_lock_holders(db_path)


def test_a_peer_process_that_exits_leaves_the_writers_wal_in_place(db_path: Path):
    settings = load_settings(db=db_path)
    peer = (
        "import sys; from app.db import open_database\n"
        "with open_database(sys.argv[1]) as db: db.thread_rows()\n"
    )
    with open_database(db_path) as database, open_memory(settings):
        connection = database.saver.conn
        connection.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
        connection.execute("INSERT INTO probe VALUES (1)")
        connection.commit()
        wal = db_path.with_name(db_path.name + "-wal")
        assert wal.exists()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        subprocess.run([sys.executable, "-c", peer, str(db_path)], env=env, check=True)
        assert wal.exists(), "the peer believed it was the last connection and removed the WAL"
        connection.execute("INSERT INTO probe VALUES (2)")
        connection.commit()
    with sqlite3.connect(db_path) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert check.execute("SELECT COUNT(*) FROM probe").fetchone() == (2,)


def test_connections_opening_a_new_database_together_all_get_in(tmp_path: Path):
    """Switching a new file to WAL needs an exclusive lock SQLite does not wait for: without a
    retry, one of several processes starting on a new database at once failed with "locked" (in
    about one trial in ten here; forty trials make a regression all but certain to show)."""
    for trial in range(40):
        path = tmp_path / f"new-{trial}" / "agent.sqlite"
        start = threading.Barrier(8)
        failures: list[BaseException] = []

        def open_it(
            path: Path = path, start: threading.Barrier = start, failures: list = failures
        ) -> None:
            start.wait()
            try:
                connect(path, busy_timeout=5.0).close()
            except Exception as exc:  # the failure the test is about, whatever its type
                failures.append(exc)

        workers = [threading.Thread(target=open_it) for _ in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert failures == [], failures
