"""The REPL draws its prompt before the run is set up (app/cli/repl_start.py): LangGraph, the
database, the memory and the tools load in the background, and the first message waits for them.
A real pseudo-terminal; the set-up is held at its first import of the runtime until released."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect

from tests.conftest import REPO, run_cli

PROMPT = "demo>"


def held_repl(isolated: Path) -> tuple[pexpect.spawn, Path]:
    """`chat --thread demo` at its prompt, its set-up held until the FIFO returned is opened."""
    release = isolated / "release"
    os.mkfifo(release)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "dumb"}
    args = ["-m", "tests.scripts.hold_at_import", "app.service.runtime", str(release)]
    child = pexpect.spawn(
        sys.executable,
        [*args, "chat", "--thread", "demo"],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
    )
    child.expect(PROMPT)  # drawn while the set-up is held
    return child, release


def let_go(release: Path) -> None:
    with open(release, "wb"):  # the held import goes on once its FIFO has a writer
        pass


def test_the_prompt_comes_before_the_set_up_and_the_first_message_waits_for_it(isolated: Path):
    child, release = held_repl(isolated)
    assert "new thread" in child.before and "not a language model" in child.before
    child.sendline("what is 6 times 7")
    let_go(release)
    child.expect(r"6 \* 7 = 42")
    child.expect(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_leaving_before_the_set_up_has_finished_closes_it_cleanly(isolated: Path):
    child, release = held_repl(isolated)
    child.sendline("/exit")
    let_go(release)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_thread_with_turns_shows_its_recap_before_the_set_up(isolated: Path):
    assert run_cli("chat", "-t", "demo", "-m", "my name is Ada").returncode == 0
    child, release = held_repl(isolated)
    assert "thread demo (1 earlier turn)" in child.before
    assert re.search(r"you\s+my name is Ada", child.before)
    assert re.search(r"agent\s+Nice to meet you, Ada!", child.before)
    child.sendline("/exit")
    let_go(release)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
