"""Threads survive processes, crashes and concurrent writers; tampered or damaged databases are refused.
The tests taking `database` run on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from app.chat import ChatSession
from app.config import load_settings
from app.context import make_context
from app.store import open_checkpointer
from tests.conftest import REPO, run_cli, run_cli_process
from tests.db_helpers import execute
from tests.fakes import ScriptedChatModel

SLOW_TURN = REPO / "tests" / "scripts" / "slow_turn.py"


def start_slow_turn(thread: str, marker: Path, seconds: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, str(SLOW_TURN), thread, str(marker), str(seconds)],
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
    process = start_slow_turn("crash", isolated / "started", seconds=120)
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
    process = start_slow_turn("shared", isolated / "started", seconds=4)
    busy = run_cli_process("chat", "-t", "shared", "-m", "what is 1 plus 1")  # a second writer
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
