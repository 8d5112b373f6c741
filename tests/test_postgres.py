"""PostgreSQL specifics: the advisory thread lock across processes, prune/delete/vacuum over the
saver's shared blobs, memory and the corpus with a server database, and connection errors that say
what to do without ever printing the password."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.db import lock_thread, open_database, thread_interrupted
from app.errors import ThreadBusyError, UsageError
from app.models.offline import OfflineChatModel
from app.service.maintenance import delete_thread, prune, thread_sizes, vacuum
from app.service.threads import list_threads
from graphs.react.graph import build_graph
from graphs.state import AgentContext
from tests.conftest import REPO, run_cli
from tests.db_helpers import execute
from tests.pg_server import PASSWORD, free_port
from tests.test_maintenance import build_small_graph, roll_back_to_end_of_turn, run_turns, states
from tools import default_tools

HOLD_LOCK = (
    "import sys, time\n"
    "from app.db import lock_thread\n"
    "lock = lock_thread(sys.argv[1], sys.argv[2])\n"
    "lock.__enter__()\n"
    "print('locked', flush=True)\n"
    "time.sleep(120)\n"
)
UNREFERENCED_BLOBS = """
SELECT COUNT(*) FROM checkpoint_blobs AS b WHERE NOT EXISTS (
    SELECT 1 FROM checkpoints AS c WHERE c.thread_id = b.thread_id
    AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)
"""


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout.decode() + result.stderr.decode()


def test_the_advisory_lock_holds_across_processes_and_dies_with_its_holder(pg_url: str):
    assert run_cli("chat", "-t", "t", "-m", "what is 1 plus 1").returncode == 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, pg_url, "t"], stdout=subprocess.PIPE, env=env
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        busy_pattern = rf"thread t is busy \(pid {holder.pid}@"
        with pytest.raises(ThreadBusyError, match=busy_pattern), lock_thread(pg_url, "t"):
            pass
        busy = run_cli("chat", "-t", "t", "-m", "what is 2 plus 2")
        assert busy.returncode == 2 and f"thread t is busy (pid {holder.pid}@" in output(busy)
        assert not thread_interrupted(pg_url, "t")  # alive and holding it
        with lock_thread(pg_url, "other"):  # other threads are not affected
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)

    deadline = time.monotonic() + 20  # the server notices the dead connection
    while not thread_interrupted(pg_url, "t"):
        assert time.monotonic() < deadline, "the killed holder's lock was never released"
        time.sleep(0.1)
    listed = json.loads(run_cli("threads", "list", "--json").stdout)
    assert [(t["thread_id"], t["interrupted"]) for t in listed] == [("t", True)]
    again = run_cli("chat", "-t", "t", "-m", "what is 2 plus 2")
    assert again.returncode == 0, again.stderr.decode()
    assert not thread_interrupted(pg_url, "t")


def fill(database_url: str) -> None:
    """small: 12 turns of a delta channel snapshotting every 3 updates; short: 3 Waypoint turns,
    rolled back to turn 1, then one more (an abandoned branch)."""
    with open_database(database_url) as database:
        run_turns(build_small_graph(database.saver), "small", 12)
        graph = build_graph(database.saver)
        context = AgentContext(model=OfflineChatModel(), tools=default_tools(Path("ws")))
        run_turns(graph, "short", 3, context)
        roll_back_to_end_of_turn(graph, "short", 1)
        run_turns(graph, "short", 1, context)


def ids(database_url: str, thread: str) -> set[str]:
    sql = "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s"
    return {cid for (cid,) in execute(database_url, sql, sql, (thread,))}


def test_prune_on_postgres_keeps_what_it_keeps_identical_and_matches_sqlite(
    pg_url: str, db_path: Path
):
    fill(pg_url)
    fill(str(db_path))
    before = {thread: ids(pg_url, thread) for thread in ("small", "short")}
    with open_database(pg_url) as database:
        graph = build_small_graph(database.saver)
        small_before = states(graph, "small", before["small"])
        sizes_before = thread_sizes(database)
        dry = prune(database, keep_last_turns=3, older_than_days=None, dry_run=True)
        assert {thread: ids(pg_url, thread) for thread in before} == before
        real = prune(database, keep_last_turns=3, older_than_days=None, dry_run=False)
        sizes_after = thread_sizes(database)
        after = ids(pg_url, "small")
        assert states(graph, "small", after) == {cid: small_before[cid] for cid in after}
        head = graph.get_state({"configurable": {"thread_id": "small"}}).values["items"]
    with open_database(str(db_path)) as database:
        on_sqlite = prune(database, keep_last_turns=3, older_than_days=None, dry_run=False)

    assert dry.threads == real.threads and real.checkpoints_deleted > 0
    assert len(after) < len(before["small"])
    assert head == [f"{kind} {n}" for n in range(1, 13) for kind in ("question", "answer")]
    pg_counts = {t.thread_id: (t.checkpoints_deleted, t.writes_deleted) for t in real.threads}
    sqlite_counts = {
        t.thread_id: (t.checkpoints_deleted, t.writes_deleted) for t in on_sqlite.threads
    }
    assert pg_counts["short"] == sqlite_counts["short"]  # no snapshot: the same branch is kept
    # PostgresSaver shares a snapshot blob with later checkpoints at the same version, so its delta
    # walk can stop one checkpoint earlier than SqliteSaver's, and prune may drop that one too.
    assert sqlite_counts["small"][0] <= pg_counts["small"][0] <= sqlite_counts["small"][0] + 4
    assert sum(sizes_after.values()) == sum(sizes_before.values()) - real.bytes_freed
    assert execute(pg_url, "", UNREFERENCED_BLOBS) == [(0,)]
    orphan_writes = (
        "SELECT COUNT(*) FROM checkpoint_writes AS w WHERE NOT EXISTS (SELECT 1 FROM checkpoints "
        "AS c WHERE c.thread_id = w.thread_id AND c.checkpoint_id = w.checkpoint_id)"
    )
    assert execute(pg_url, "", orphan_writes) == [(0,)]


def test_delete_vacuum_and_listing_on_postgres(pg_url: str):
    fill(pg_url)
    short = len(ids(pg_url, "short"))
    with open_database(pg_url) as database:
        listed = list_threads(database)
        # turns: the head's (rolled back to turn 1, then one more), not the highest ever stored
        assert [(t.thread_id, t.turns) for t in listed] == [("short", 2), ("small", 12)]
        assert listed[0].size_bytes > 0 and not listed[0].interrupted
        report = delete_thread(database, "short")
        assert report.checkpoints == short and report.writes > 0 and report.bytes_freed > 0
        with pytest.raises(UsageError, match="thread short does not exist"):
            delete_thread(database, "short")
        space = vacuum(database)
    for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
        sql = f"SELECT COUNT(*) FROM {table} WHERE thread_id = 'short'"
        assert execute(pg_url, "", sql) == [(0,)]
    assert ids(pg_url, "small")
    assert "PostgreSQL reuses freed space" in space.note
    result = run_cli("threads", "vacuum")
    assert result.returncode == 0 and "postgresql://waypoint:****@" in output(result)
    assert PASSWORD not in output(result)


def test_memory_and_the_corpus_with_a_server_database(pg_url: str, isolated: Path):
    first = run_cli("chat", "-t", "a", "-m", "remember that my favourite colour is green")
    assert first.returncode == 0, first.stderr.decode()
    second = run_cli("chat", "-t", "b", "-m", "what do you remember about colour?")
    assert second.returncode == 0, second.stderr.decode()
    assert "green" in second.stdout.decode()
    rows = execute(pg_url, "", "SELECT COUNT(*) FROM memory_terms WHERE kind = 'memories'")
    assert rows == [(1,)]

    (isolated / "notes.md").write_text(
        "# Release checklist\n\nTag the release, then announce it.\n"
    )
    assert run_cli("corpus", "add", "notes.md").returncode == 0
    found = run_cli("corpus", "search", "release checklist")
    assert found.returncode == 0 and "Release checklist" in found.stdout.decode()
    assert (isolated / "checkpoints" / "corpus.sqlite").exists()  # the corpus stays local


def test_connection_failures_are_clear_and_never_show_the_password(pg_url: str):
    base = pg_url.rsplit("/", 1)[0]
    port = pg_url.rsplit(":", 1)[1].split("/")[0]
    wrong = pg_url.replace(PASSWORD, "Wrong-Pass-123")
    cases = [
        (wrong, "PostgreSQL refused the login for postgresql://waypoint:****@"),
        (f"{base}/missing_db", "the database 'missing_db' does not exist on the server"),
        (pg_url.replace(f":{port}/", f":{free_port()}/"), "cannot reach the PostgreSQL server"),
        (f"{pg_url}?bogus=1", "invalid PostgreSQL URL"),
    ]
    for url, message in cases:
        result = run_cli("threads", "list", "--db", url)
        text = output(result)
        assert result.returncode == 3, text
        assert message in text and "--db/APP_DB" in text
        assert PASSWORD not in text and "Wrong-Pass-123" not in text and "Traceback" not in text

    chat = run_cli("chat", "-t", "x", "-m", "hi", "--db", wrong)
    assert chat.returncode == 3 and "Wrong-Pass-123" not in output(chat)
    doctor = run_cli("doctor")
    assert doctor.returncode == 0, output(doctor)
    assert "postgresql://waypoint:****@127.0.0.1" in output(doctor) and "PostgreSQL 1" in output(
        doctor
    )
    assert PASSWORD not in output(doctor)
    failing = run_cli("doctor", "--db", wrong)
    assert failing.returncode == 1 and "refused the login" in output(failing)
    assert "Wrong-Pass-123" not in output(failing)
    other = run_cli("threads", "list", "--db", "mysql://user:Secret-9@host/db")
    assert other.returncode == 3 and "unsupported database URL scheme 'mysql'" in output(other)
    assert "Secret-9" not in output(other)


def test_a_message_with_a_nul_character_is_kept_on_postgres(pg_url: str):
    """JSONB refuses NUL: the saver drops it from the metadata (the title); the message keeps it."""
    # argv cannot carry NUL; piped stdin can.
    result = run_cli("chat", "-t", "nul", "--jsonl", input=b"what is 2 plus 2\x00 please\n")
    assert result.returncode == 0, output(result)
    assert '"status": "answered"' in result.stdout.decode()
    with open_database(pg_url) as database:
        graph = build_graph(database.saver)
        messages = graph.get_state({"configurable": {"thread_id": "nul"}}).values["messages"]
        assert messages[0].content.rstrip() == "what is 2 plus 2\x00 please"
        [row] = [t for t in list_threads(database) if t.thread_id == "nul"]
        assert row.title.strip() == "what is 2 plus 2 please"
