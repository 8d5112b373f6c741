"""The interactive REPL in a real pseudo-terminal: turns, slash commands, Ctrl-C, resuming a thread."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

from tests.conftest import REPO

PROMPT = "demo>"


def spawn(*args: str, term: str = "dumb") -> pexpect.spawn:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": term}
    child = pexpect.spawn(
        sys.executable, list(args), env=env, encoding="utf-8", timeout=60, dimensions=(50, 160)
    )
    child.expect(PROMPT)
    return child


def test_repl_turns_slash_commands_and_resume():
    child = spawn("-m", "app", "chat", "--thread", "demo")
    assert "new thread" in child.before and "not a language model" in child.before
    child.sendline("what is 6 times 7")
    child.expect(r"6 \* 7 = 42")
    child.expect(PROMPT)
    child.sendline("/history")
    child.expect("answered")
    child.expect(PROMPT)
    child.sendline("/threads")
    child.expect("demo")
    child.expect(PROMPT)
    child.sendline("/nonsense")
    child.expect("unknown command /nonsense; type /help")
    child.expect(PROMPT)
    child.sendcontrol("c")  # at the prompt: nothing to stop, the REPL stays
    child.sendline("my name is Ada")
    child.expect("I'll remember your name")
    child.expect(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)

    again = spawn("-m", "app", "chat", "--thread", "demo")
    assert "2 earlier turns" in again.before and "agent Nice to meet you, Ada!" in again.before
    again.sendline("what's my name?")
    again.expect("Your name is Ada.")
    again.expect(PROMPT)
    again.sendline("/undo")
    again.expect("is back at turn 2")
    again.expect(PROMPT)
    again.sendline("/rewind")
    again.expect("usage: /rewind CHECKPOINT_ID")
    again.expect(PROMPT)
    again.sendline("/new")
    again.expect(r"new thread \S+")
    again.expect(r"\d{8}-\d{6}-[0-9a-f]{4}>")
    again.sendline("/exit")
    again.expect(pexpect.EOF)


def test_ctrl_c_during_a_turn_returns_to_the_prompt_and_keeps_the_thread(isolated: Path):
    marker = isolated / "started"
    script = str(REPO / "tests" / "scripts" / "slow_turn.py")
    child = spawn(
        script,
        "demo",
        str(marker),
        str(isolated / "never"),
        "chat",
        "--thread",
        "demo",
        term="xterm",
    )
    child.sendline("please run the slow step")
    child.expect(r"running slow_step · \d+s")  # the spinner on a real terminal
    child.sendcontrol("c")
    child.expect("was interrupted; what was shown is saved")
    child.expect(PROMPT)
    child.sendline("/history")
    child.expect("cancelled")
    child.expect(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)


def kill_mid_turn(isolated: Path, thread: str) -> None:
    from tests.test_persistence import start_slow_turn

    process = start_slow_turn(thread, isolated / "killed-started")
    process.kill()
    process.wait(timeout=30)


@pytest.mark.parametrize("choice", ["resume", "discard"])
def test_opening_an_interrupted_thread_offers_to_resume_or_discard(isolated: Path, choice: str):
    kill_mid_turn(isolated, "demo")
    script = str(REPO / "tests" / "scripts" / "slow_turn.py")
    released = isolated / "released"
    released.touch()  # a resumed slow step finishes at once
    os.environ["SLOW_TURN_RESUME"] = "1"
    try:
        child = pexpect.spawn(
            sys.executable,
            [
                script,
                "demo",
                str(isolated / "again"),
                str(released),
                "chat",
                "--thread",
                "demo",
            ],
            env={
                **os.environ,
                "PYTHONPATH": str(REPO),
                "TERM": "dumb",
                "PROMPT_TOOLKIT_NO_CPR": "1",
            },
            encoding="utf-8",
            timeout=60,
            dimensions=(50, 160),
        )
    finally:
        del os.environ["SLOW_TURN_RESUME"]
    child.expect("was interrupted")
    child.expect(r"open tool calls:\s+slow_step")  # wrapped between words at the width
    child.expect("esume it or")
    child.sendline(choice[0])
    if choice == "resume":
        child.expect("finished A")
        child.expect("all done")
    else:
        child.expect(r"1 unfinished tool call closed as\s+cancelled")
    child.expect(PROMPT)
    child.sendline("/history")
    child.expect("answered" if choice == "resume" else "cancelled")
    child.expect(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
