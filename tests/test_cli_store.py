"""export / import / threads delete / prune / vacuum / list, as a user runs them."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

from tests.conftest import run_cli
from tests.test_timetravel import head_messages, seed


def test_export_json_import_as_new_round_trips_every_checkpoint(isolated: Path):
    seed("orig", "my name is Ada", "what is 2 plus 2")
    assert run_cli("rollback", "-t", "orig", "-n", "1").returncode == 0
    exported = run_cli("export", "-t", "orig", "-o", str(isolated / "orig.json"))
    assert exported.returncode == 0, exported.stderr.decode()
    imported = run_cli("import", str(isolated / "orig.json"), "--as", "copy")
    assert imported.returncode == 0, imported.stderr.decode()
    assert imported.stdout.decode() == "copy\n"

    def every(thread: str) -> list[dict]:
        rows = json.loads(run_cli("history", "-t", thread, "--all", "--json").stdout)
        return [{k: v for k, v in row.items() if k != "created_at"} for row in rows]

    assert every("copy") == every("orig")
    assert head_messages("copy") == head_messages("orig")
    again = run_cli("import", str(isolated / "orig.json"))
    assert again.returncode == 2
    assert "thread orig already exists; pass --as NEW" in again.stderr.decode()


def test_export_markdown_to_stdout():
    seed("md", "what is 6 times 7")
    result = run_cli("export", "-t", "md", "--format", "md")
    text = result.stdout.decode()
    assert text.startswith("# Waypoint thread `md`")
    assert "> what is 6 times 7" in text and "`calculator`" in text and "6 * 7 = 42" in text


def test_import_of_a_bad_file_is_a_clear_error_and_imports_nothing(isolated: Path):
    bad = isolated / "bad.json"
    bad.write_text('{"format": "something-else"}')
    for path, message in [
        (bad, "not a Waypoint thread export"),
        (isolated / "missing.json", "does not exist"),
    ]:
        result = run_cli("import", str(path), "--as", "x")
        assert result.returncode == 2, result.stderr.decode()
        assert message in result.stderr.decode()
    assert json.loads(run_cli("threads", "list", "--json").stdout) == []


def test_export_of_an_unknown_thread_fails_without_writing_the_file(isolated: Path):
    target = isolated / "out.json"
    result = run_cli("export", "-t", "ghost", "-o", str(target))
    assert result.returncode == 2
    assert "thread ghost does not exist" in result.stderr.decode()
    assert not target.exists()


def test_threads_list_shows_size_and_delete_asks_first():
    seed("a", "what is 1 plus 1")
    seed("b", "what is 2 plus 2")
    listing = json.loads(run_cli("threads", "list", "--json").stdout)
    assert {t["thread_id"] for t in listing} == {"a", "b"}
    assert all(t["size_bytes"] > 1000 and t["interrupted"] is False for t in listing)

    refused = run_cli("threads", "delete", "a")
    assert refused.returncode == 2 and "pass --yes" in refused.stderr.decode()
    deleted = run_cli("threads", "delete", "a", "--yes")
    assert deleted.returncode == 0 and "deleted thread a" in deleted.stderr.decode()
    assert [t["thread_id"] for t in json.loads(run_cli("threads", "list", "--json").stdout)] == [
        "b"
    ]
    assert run_cli("threads", "delete", "a", "--yes").returncode == 2


def test_a_killed_run_shows_as_interrupted_until_the_next_turn(isolated: Path):
    from tests.test_persistence import start_slow_turn

    process = start_slow_turn("dead", isolated / "started")
    process.kill()
    process.wait(timeout=30)
    listing = json.loads(run_cli("threads", "list", "--json").stdout)
    assert listing[0]["interrupted"] is True
    assert (
        json.loads(run_cli("history", "-t", "dead", "--json").stdout)[0]["status"] == "interrupted"
    )
    assert run_cli("chat", "-t", "dead", "-m", "what is 1 plus 1").returncode == 0
    assert json.loads(run_cli("threads", "list", "--json").stdout)[0]["interrupted"] is False


def test_prune_dry_run_then_prune_then_vacuum():
    seed("p", "what is 1 plus 1", "what is 2 plus 2", "what is 3 plus 3")
    assert run_cli("rollback", "-t", "p", "-n", "2").returncode == 0
    dry = run_cli("threads", "prune", "--keep-last-turns", "1", "--dry-run", "--json")
    report = json.loads(dry.stdout)
    assert report["dry_run"] is True and report["checkpoints_deleted"] > 0
    before = head_messages("p")
    real = json.loads(run_cli("threads", "prune", "--keep-last-turns", "1", "--json").stdout)
    assert real["checkpoints_deleted"] == report["checkpoints_deleted"]
    assert head_messages("p") == before
    vacuum = run_cli("threads", "vacuum")
    assert vacuum.returncode == 0 and "freed" in vacuum.stderr.decode()
    nothing = run_cli("threads", "prune")
    assert nothing.returncode == 2


def test_export_writes_through_links_pipes_and_devices_and_never_replaces_them(isolated: Path):
    seed("x", "what is 1 plus 1")
    target = isolated / "real.md"
    target.write_text("old")
    link = isolated / "link.md"
    link.symlink_to(target)
    assert run_cli("export", "-t", "x", "-f", "md", "-o", str(link)).returncode == 0
    assert link.is_symlink() and "1 + 1 = 2" in target.read_text()

    fifo = isolated / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    written = run_cli("export", "-t", "x", "-f", "md", "-o", str(fifo))
    reader.join(timeout=60)
    assert written.returncode == 0, written.stderr.decode()
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and b"1 + 1 = 2" in received[0]

    if Path("/dev/full").exists():
        full = run_cli("export", "-t", "x", "-o", "/dev/full")
        assert full.returncode == 2 and "No space left on device" in full.stderr.decode()
        assert stat.S_ISCHR(Path("/dev/full").stat().st_mode)


def test_a_database_path_that_is_not_a_regular_file_is_refused_and_left_alone(isolated: Path):
    fifo = isolated / "db.fifo"
    os.mkfifo(fifo)
    for path in [fifo, *([Path("/dev/full")] if Path("/dev/full").exists() else [])]:
        result = run_cli("threads", "list", "--db", str(path))
        assert result.returncode == 3, result.stderr.decode()
        assert "is not a regular file" in result.stderr.decode()
        assert not Path(f"{path}-journal").exists() and not Path(f"{path}-wal").exists()
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
