"""Threads survive processes, crashes and concurrent writers; tampered or damaged databases are refused.
The tests taking `database` run on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from app.config import load_settings
from app.db import sqlite as sqlite_backend
from app.db.sqlite import database_error
from app.service.context import make_context
from app.service.session import ChatSession
from app.store import open_checkpointer
from tests.cli_boundary import invoke
from tests.conftest import REPO, run_cli, run_cli_process
from tests.db_helpers import execute
from tests.fakes import ScriptedChatModel
from tests.openai_server import OpenAIServer, hang
from tests.openai_server import openai_server as openai_server  # the fixture

SLOW_TURN = REPO / "tests" / "scripts" / "slow_turn.py"


def start_slow_turn(thread: str, marker: Path, release: Path | None = None) -> subprocess.Popen:
    """A real `chat` process whose tool has started (the marker exists) and holds until `release`
    exists; with no `release`, until the test kills it."""
    release = release or marker.with_name(marker.name + ".never")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, str(SLOW_TURN), thread, str(marker), str(release)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the slow tool never started"
        time.sleep(0.05)
    return process


def thread_messages(thread: str) -> list:
    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, thread, make_context(settings, ScriptedChatModel()))
        return session.graph.get_state(session.config).values.get("messages", [])


def test_a_fact_survives_a_process_restart(database: str):
    # Written by another process, read back by this one, which never saw it in memory.
    first = run_cli_process("chat", "--thread", "mem", "-m", "My name is Ada")
    assert first.returncode == 0, first.stderr.decode()
    second = run_cli("chat", "--thread", "mem", "-m", "What's my name?")
    assert second.returncode == 0, second.stderr.decode()
    assert "Your name is Ada." in second.stdout.decode()


def test_kill_9_during_tools_then_a_new_turn_works_and_keeps_history(isolated: Path, database: str):
    assert run_cli("chat", "-t", "crash", "-m", "what is 6 times 7").returncode == 0
    process = start_slow_turn("crash", isolated / "started")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)

    after = run_cli("chat", "-t", "crash", "-m", "what is 2 plus 3")
    assert after.returncode == 0, after.stderr.decode()
    assert "2 + 3 = 5" in after.stdout.decode()
    assert "interrupted" in after.stderr.decode()

    messages = thread_messages("crash")
    humans = [m.content for m in messages if isinstance(m, HumanMessage)]
    assert humans == ["what is 6 times 7", "please run the slow step", "what is 2 plus 3"]
    cancelled = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "slow-1"]
    assert len(cancelled) == 1 and cancelled[0].status == "error"
    assert "interrupted" in cancelled[0].content
    assert any("6 * 7 = 42" in str(m.content) for m in messages if isinstance(m, AIMessage))


def test_a_second_writer_on_the_same_thread_gets_the_busy_error_and_nothing_is_lost(
    isolated: Path, database: str
):
    release = isolated / "release"
    process = start_slow_turn("shared", isolated / "started", release)
    busy = run_cli_process("chat", "-t", "shared", "-m", "what is 1 plus 1")  # a second writer
    release.touch()  # the first writer finishes only after the second was turned away
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert busy.returncode == 2
    assert f"thread shared is busy (pid {process.pid}" in busy.stderr.decode()

    again = run_cli("chat", "-t", "shared", "-m", "what is 1 plus 1")
    assert again.returncode == 0
    humans = [m.content for m in thread_messages("shared") if isinstance(m, HumanMessage)]
    assert humans == ["please run the slow step", "what is 1 plus 1"]
    assert json.loads(stdout.splitlines()[-1])["answer"] == "all done"


def test_a_tampered_checkpoint_blob_does_not_execute_code(isolated: Path, database: str):
    assert run_cli("chat", "-t", "victim", "-m", "what is 6 times 7").returncode == 0
    marker = isolated / "pwned"
    payload = ormsgpack.packb(("os", "system", [f"touch {marker}"]))
    evil = ormsgpack.packb([ormsgpack.Ext(1, payload)])
    [(changed,)] = execute(
        database,
        "UPDATE writes SET value = ?, type = 'msgpack' WHERE thread_id = 'victim' "
        "AND channel = 'messages'",
        "UPDATE checkpoint_writes SET blob = %s, type = 'msgpack' WHERE thread_id = 'victim' "
        "AND channel = 'messages'",
        (evil,),
    )
    assert changed > 0

    result = run_cli("chat", "-t", "victim", "-m", "what is 1 plus 1")
    history = run_cli("history", "-t", "victim")
    assert not marker.exists()
    assert result.returncode == 3
    assert "is unreadable" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode() + history.stderr.decode()


def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(isolated: Path):
    bogus = isolated / "notes.txt"
    bogus.write_text("my precious notes\n")
    result = run_cli("chat", "-t", "x", "-m", "hi", "--db", str(bogus))
    assert result.returncode == 3
    assert f"{bogus} is not a Waypoint database" in result.stderr.decode()
    assert bogus.read_text() == "my precious notes\n"


def test_a_directory_as_database_path_is_refused(isolated: Path):
    result = run_cli("threads", "list", "--db", str(isolated))
    assert result.returncode == 3
    assert "is a directory" in result.stderr.decode()


def test_a_truncated_database_is_refused_not_recreated(isolated: Path, db_path: Path):
    assert run_cli("chat", "-t", "t1", "-m", "what is 1 plus 1").returncode == 0
    with sqlite3.connect(db_path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = db_path.read_bytes()
    db_path.write_bytes(data[:5000])
    result = run_cli("chat", "-t", "t1", "-m", "hi again")
    assert result.returncode == 3, result.stderr.decode()
    assert str(db_path) in result.stderr.decode()
    assert db_path.read_bytes() == data[:5000]


def test_database_file_is_private(db_path: Path):
    assert run_cli("chat", "-t", "p", "-m", "what is 1 plus 1").returncode == 0
    assert db_path.stat().st_mode & 0o777 == 0o600


# --- what happens to the file after it was opened -------------------------------------------------

COMMANDS = [
    ["threads", "list"],
    ["history", "-t", "d"],
    ["show", "-t", "d"],
    ["export", "-t", "d"],
    ["chat", "-t", "d", "-m", "what is 1 plus 1"],
]


def damage_table(db_path: Path, table: str) -> None:
    """Overwrite the root page of `table` with garbage. The header and the schema stay valid, so the
    database opens; the first query of that table reports "database disk image is malformed"."""
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        [(page_size,)] = connection.execute("PRAGMA page_size").fetchall()
        [(root,)] = connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchall()
    with open(db_path, "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\x55" * page_size)


@pytest.mark.parametrize("table", ["checkpoints", "writes"])
def test_a_database_damaged_after_opening_is_refused_by_every_command(db_path: Path, table: str):
    assert invoke("chat", "-t", "d", "-m", "what is 6 times 7").code == 0
    damage_table(db_path, table)
    damaged = db_path.read_bytes()
    for args in COMMANDS:
        outcome = invoke(*args)
        assert outcome.internal_error is None, (args, outcome.internal_error)
        assert outcome.code == 3, (args, outcome.stderr)
        assert (
            f"the database {db_path} is damaged (database disk image is malformed); "
            "it was left untouched" in outcome.stderr
        ), args
    assert db_path.read_bytes() == damaged


def test_a_full_database_says_the_disk_is_full_and_keeps_every_earlier_turn(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """SQLite's max_page_count makes the file "full" the way a full disk does (SQLITE_FULL)."""
    assert invoke("chat", "-t", "f", "-m", "what is 6 times 7").code == 0
    real_connect = sqlite_backend.connect

    def capped(path: Path, busy_timeout: float) -> sqlite3.Connection:
        connection = real_connect(path, busy_timeout)
        [(pages,)] = connection.execute("PRAGMA page_count").fetchall()
        connection.execute(f"PRAGMA max_page_count = {pages}")
        return connection

    monkeypatch.setattr(sqlite_backend, "connect", capped)
    full = invoke("chat", "-t", "f", "-m", "what is 2 plus 3")
    assert full.internal_error is None, full.internal_error
    assert full.code == 3
    assert f"the disk holding the database {db_path} is full" in full.stderr
    assert "free space and retry" in full.stderr

    monkeypatch.setattr(sqlite_backend, "connect", real_connect)
    history = json.loads(invoke("history", "-t", "f", "--json").stdout)
    assert [(h["turn"], h["status"], h["tools"]) for h in history][-1] == (
        1,
        "answered",
        ["calculator"],
    )
    retried = invoke("chat", "-t", "f", "-m", "what is 2 plus 3")
    assert (retried.code, retried.stdout) == (0, "2 + 3 = 5\n"), retried.stderr
    humans = [m.content for m in thread_messages("f") if isinstance(m, HumanMessage)]
    # Where the disk fills depends on the blobs' sizes: the failed turn's first steps may have fit
    # (and are kept, as every saved step is); the earlier turn and the retry are there either way.
    assert humans[0] == "what is 6 times 7" and set(humans[1:]) == {"what is 2 plus 3"}
    assert len(humans) in (2, 3)


def fake_statvfs(*, read_only: bool = False, free_blocks: int = 1000):  # type: ignore[no-untyped-def]
    flags = os.ST_RDONLY if read_only else 0
    return lambda path: SimpleNamespace(f_flag=flags, f_bavail=free_blocks)


def sqlite_failure(text: str, code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(text)
    error.sqlite_errorcode = code
    return error


def test_read_only_and_full_file_systems_are_told_apart_from_other_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """SQLite reports a read-only file system as "unable to open database file" (or a failed write as
    "disk I/O error"), and a full disk sometimes as "disk I/O error": the file system says which."""
    path = tmp_path / "agent.sqlite"
    cannot_open = sqlite_failure("unable to open database file", 14)  # SQLITE_CANTOPEN
    io_error = sqlite_failure("disk I/O error", 10)  # SQLITE_IOERR

    monkeypatch.setattr(os, "statvfs", fake_statvfs())
    assert str(database_error(path, cannot_open)) == (
        f"cannot use the database {path}: unable to open database file"
    )
    assert str(database_error(path, io_error)) == f"cannot use the database {path}: disk I/O error"

    monkeypatch.setattr(os, "statvfs", fake_statvfs(read_only=True))
    for error in (cannot_open, io_error):
        assert str(database_error(path, error)).startswith(
            f"the database {path} is read-only (it is on a read-only file system)"
        )

    monkeypatch.setattr(os, "statvfs", fake_statvfs(free_blocks=0))
    assert str(database_error(path, io_error)).startswith(
        f"the disk holding the database {path} is full (disk I/O error); free space and retry"
    )


def user_namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


READ_ONLY_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def test_a_database_on_a_read_only_file_system_says_read_only(db_path: Path):
    """A real read-only mount, in a user and mount namespace of its own (no root needed)."""
    if not user_namespaces_work():
        pytest.skip("unprivileged user namespaces are not available here")
    assert invoke("chat", "-t", "r", "-m", "what is 1 plus 1").code == 0
    before = db_path.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "NO_COLOR": "1"}
    command = [sys.executable, "-m", "app", "chat", "-t", "r", "-m", "what is 2 plus 2"]
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", READ_ONLY_MOUNT, "sh", str(db_path.parent), *command],
        capture_output=True,
        env=env,
        timeout=90,
    )
    stderr = result.stderr.decode()
    assert result.returncode == 3, stderr
    assert f"the database {db_path} is read-only (it is on a read-only file system)" in stderr
    assert "Traceback" not in stderr
    assert db_path.read_bytes() == before


def test_a_lock_file_that_cannot_be_written_is_a_config_error(db_path: Path):
    """What a full or read-only file system does to the per-thread lock file, made deterministic:
    a file where the lock directory goes."""
    assert invoke("chat", "-t", "l", "-m", "what is 1 plus 1").code == 0
    locks = db_path.with_name(db_path.name + ".locks")
    shutil.rmtree(locks)
    locks.write_text("in the way")
    outcome = invoke("chat", "-t", "l", "-m", "what is 2 plus 2")
    assert outcome.internal_error is None, outcome.internal_error
    assert outcome.code == 3
    assert f"cannot lock thread l: the lock file {locks / 'l.lock'} cannot be written" in (
        outcome.stderr
    )


def test_a_turn_killed_in_its_model_call_keeps_its_own_row_and_number(
    isolated: Path, openai_server: OpenAIServer
):
    assert run_cli("chat", "-t", "k", "-m", "what is 1 plus 1").returncode == 0
    openai_server.add(hang(120))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OPENAI_BASE_URL": openai_server.base_url,
        "OPENAI_API_KEY": "test",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app",
            "chat",
            "-t",
            "k",
            "-m",
            "what is 2 plus 2",
            "--model",
            "openai:test",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not openai_server.completions:  # the model call has begun: kill it there
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)

    third = run_cli("chat", "-t", "k", "-m", "what is 3 plus 3")
    assert third.returncode == 0 and third.stdout.decode() == "3 + 3 = 6\n"
    rows = json.loads(run_cli("history", "-t", "k", "--json").stdout)
    assert [(r["turn"], r["status"], r["preview"]) for r in rows] == [
        (3, "answered", "what is 3 plus 3"),
        (2, "cancelled", "what is 2 plus 2"),  # closed by the next turn as interrupted
        (1, "answered", "what is 1 plus 1"),
    ]
