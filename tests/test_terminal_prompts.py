"""What the terminal says at its edges: a "no" to a confirmation changes nothing and is not an error,
an empty message is not sent, and `serve` says where its data is and which URL to open."""

from __future__ import annotations

import json
import os
import re
import signal
import sys

import pexpect

from tests.conftest import REPO, run_cli

STYLE = re.compile(r"\x1b\[[0-9;]*m")  # bold and dim, which NO_COLOR keeps


def spawn(*args: str, columns: int = 80) -> pexpect.spawn:
    """`python -m app ARGS` on a pseudo-terminal (80×24), with the test's environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(columns), "NO_COLOR": "1"}
    return pexpect.spawn(
        sys.executable,
        ["-m", "app", *args],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(24, columns),
    )


def finished(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def test_answering_no_to_delete_says_nothing_was_deleted_and_exits_0():
    assert run_cli("chat", "-t", "keep", "-m", "what is 1 plus 1").returncode == 0
    child = spawn("threads", "delete", "keep")
    child.expect(r"Delete thread keep and all its checkpoints\? \[y/N\]")
    child.sendline("n")
    child.expect("nothing deleted: thread keep is as it was")
    assert finished(child) == 0
    assert "keep" in run_cli("threads", "list").stdout.decode()


def test_answering_no_to_a_replay_says_nothing_was_replayed_and_exits_0():
    written = run_cli("chat", "-t", "r", "--approve", "auto", "-m", "write 'hi' to a.txt")
    assert written.returncode == 0, written.stderr.decode()
    rows = json.loads(run_cli("history", "-t", "r", "--all", "--json").stdout)
    start = rows[2]["checkpoint_id"]  # after the model asked for write_file, before it ran
    child = spawn("replay", "-t", "r", "-c", start)
    child.expect(r"The replay will re-run write_file\.")
    child.expect(r"Continue\? \[y/N\]")
    child.sendline("n")
    child.expect("nothing replayed: thread r is as it was")
    assert finished(child) == 0


def test_an_empty_message_is_not_sent_and_the_error_says_so():
    for args, input in ((["-m", ""], None), ([], b"\n")):
        result = run_cli("chat", "-t", "e", *args, input=input)
        assert result.returncode == 2
        error = result.stderr.decode()
        assert "the message is empty, so nothing was sent" in error
        assert "/exit" not in error
    assert "no threads yet" in run_cli("threads", "list").stdout.decode()


def test_serve_says_where_its_data_is_and_which_url_to_open(isolated):
    child = spawn("serve", "--port", "0", columns=200)  # the paths are long
    try:
        child.expect(r"http://127\.0\.0\.1:\d+/[^\r\n]*\r\n")
        said = STYLE.sub("", child.before + child.after)
    finally:
        child.kill(signal.SIGINT)
        child.expect(pexpect.EOF)
        child.close()
    assert "Waypoint · serving the API and the web page" in said
    assert re.search(rf"database\s+{re.escape(str(isolated / 'db' / 'agent.sqlite'))}\s", said)
    assert re.search(rf"workspace\s+{re.escape(str(isolated / 'workspace'))}\s", said)
    assert re.search(r"open\s+http://127\.0\.0\.1:[1-9]\d*/", said)
