"""The REPL's commands, driven in the test process through `Repl` with rich consoles of a fixed
width (80 and 160 columns): opening a thread shows its last turns, /threads numbers the threads and
/switch continues one, and what it prints fits the terminal."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from rich.console import Console
from rich.text import Text

from app.cli.repl import Repl
from app.config import load_settings
from app.service.runtime import open_runtime
from tests.conftest import run_cli


@dataclass
class Screen:
    repl: Repl
    out: io.StringIO
    err: io.StringIO

    def type(self, line: str) -> tuple[str, str]:
        """What typing `line` at the prompt printed on stdout and stderr."""
        start_out, start_err = len(self.out.getvalue()), len(self.err.getvalue())
        self.repl.handle(line.strip(), line)
        return self.out.getvalue()[start_out:], self.err.getvalue()[start_err:]


@contextlib.contextmanager
def repl_on(thread: str, width: int) -> Iterator[Screen]:
    out, err = io.StringIO(), io.StringIO()
    settings = load_settings(approve="ask")
    with open_runtime(settings) as runtime:
        repl = Repl(
            runtime,
            runtime.session(thread),
            Console(file=out, width=width),
            Console(file=err, width=width),
            show_updates=False,
            debug=False,
        )
        yield Screen(repl, out, err)


def seed(thread: str, *messages: str) -> None:
    for message in messages:
        assert run_cli("chat", "-t", thread, "-m", message).returncode in (0, 1)


def widest(text: str) -> int:
    return max((Text(line).cell_len for line in text.splitlines()), default=0)


@pytest.mark.parametrize("width", [80, 160])
def test_opening_a_thread_shows_its_last_turns_compactly(width: int):
    seed(
        "demo",
        "what is 1 plus 1",
        "what is 2 plus 2",
        "my name is Ada",
        "weather in Paris and Rome, which is warmer?",
        "what is 6 times 7",
    )
    with repl_on("demo", width) as screen:
        screen.repl.banner()
    shown = screen.err.getvalue()

    assert widest(shown) <= width
    assert "thread demo (5 earlier turns)" in shown
    assert "… 2 earlier turns not shown (/history lists them)" in shown
    assert "what is 2 plus 2" not in shown  # older than the last three
    assert re.search(r"you\s+my name is Ada", shown)
    assert re.search(r"agent\s+Nice to meet you, Ada!", shown)
    assert "✓ get_weather · ✓ get_weather · ✓ calculator" in shown
    assert re.search(
        r"you\s+what is 6 times 7\s*\n.*✓ calculator\s*\n\s*agent\s+6 \* 7 = 42", shown
    )


def test_the_banner_names_the_database_and_the_workspace(isolated):
    with repl_on("fresh", 160) as screen:
        screen.repl.banner()
    shown = screen.err.getvalue()
    assert re.search(rf"database\s+{isolated / 'db' / 'agent.sqlite'}\s*$", shown, re.M)
    assert re.search(rf"workspace\s+{isolated / 'workspace'}\s*$", shown, re.M)
    assert "thread fresh (new thread)" in shown and "earlier turn" not in shown


@pytest.mark.parametrize("width", [80, 160])
def test_threads_numbers_them_and_switch_continues_one(width: int):
    seed("alpha", "what is 1 plus 1")
    seed("beta", "my name is Bea", "what is 3 plus 3")
    with repl_on("alpha", width) as screen:
        listing, hint = screen.type("/threads")
        assert widest(listing) <= width
        numbered = dict(re.findall(r"^\s*(\d)\s+(alpha|beta)\b", listing, re.M))
        assert set(numbered.values()) == {"alpha", "beta"}
        assert "/switch N (or /switch ID) continues one" in hint

        number = next(n for n, thread in numbered.items() if thread == "beta")
        _, switched = screen.type(f"/switch {number}")
        assert screen.repl.session.thread_id == "beta"
        assert "thread beta (2 earlier turns)" in switched and "3 + 3 = 6" in switched

        out, _ = screen.type("what's my name?")
        assert "Your name is Bea." in out

        _, back = screen.type("/switch alpha")
        assert screen.repl.session.thread_id == "alpha"
        assert "thread alpha (1 earlier turn)" in back


def test_switch_to_a_thread_that_does_not_exist_says_what_to_do():
    seed("alpha", "what is 1 plus 1")
    with repl_on("alpha", 80) as screen:
        _, said = screen.type("/switch nope")
        assert "thread nope does not exist; /threads lists them, /new starts one" in said
        assert screen.repl.session.thread_id == "alpha"
        _, said = screen.type("/switch")
        assert "usage: /switch THREAD_ID, or /switch N after /threads" in said


def test_undo_in_the_repl_says_how_to_undo_it_there():
    seed("u", "what is 1 plus 1", "what is 2 plus 2")
    with repl_on("u", 80) as screen:
        _, said = screen.type("/undo")
    assert "u is back at turn 1" in said
    undo = re.search(r"undo this with: /rewind ([0-9a-f]{12})$", said, re.M)
    assert undo is not None


def test_undo_names_the_checkpoint_that_history_then_shows():
    seed("u", "what is 1 plus 1", "what is 2 plus 2")
    with repl_on("u", 80) as screen:
        _, said = screen.type("/undo")
        history, _ = screen.type("/history")
    named = re.search(r"is back at turn 1 \(checkpoint ([0-9a-f]{12})[,)]", said)
    assert named is not None
    assert re.search(rf"^\s*1\s.*\b{named.group(1)}\b", history, re.M)


def test_new_with_a_name_starts_that_thread_and_refuses_one_that_exists():
    seed("alpha", "what is 1 plus 1")
    with repl_on("alpha", 80) as screen:
        _, said = screen.type("/new mythread")
        assert screen.repl.session.thread_id == "mythread"
        assert "new thread mythread" in said
        _, said = screen.type("/new alpha")
        assert "thread alpha already exists; /switch alpha continues it" in said
        assert screen.repl.session.thread_id == "mythread"
        _, said = screen.type("/new")
        assert screen.repl.session.thread_id not in {"alpha", "mythread"}


def test_threads_shows_each_title_on_one_line():
    seed("long", "please tell me " + "about the weather in Paris and in Rome " * 4)
    seed("short", "what is 1 plus 1")
    with repl_on("short", 80) as screen:
        listing, _ = screen.type("/threads")
    rows = [line for line in listing.splitlines()[2:] if line.strip()]
    assert len(rows) == 2, listing
    assert any(row.rstrip().endswith("…") or "…" in row for row in rows)


def test_after_compact_the_recap_counts_every_earlier_turn():
    seed("c", *(f"what is {n} plus {n}" for n in range(1, 7)))
    with repl_on("c", 80) as screen:
        screen.type("/compact")
        _, switched = screen.type("/switch c")
    assert "thread c (6 earlier turns)" in switched
    # The summary replaced all but the last turn: the other five are counted, not lost.
    assert "… 5 earlier turns not shown (/history lists them)" in switched


def test_help_fits_80_columns_and_wraps_each_meaning_under_itself():
    with repl_on("h", 80) as screen:
        _, shown = screen.type("/help")
    assert widest(shown) <= 80
    assert "/new [NAME]" in shown
    compact = next(line for line in shown.splitlines() if "/compact" in line)
    after = shown.splitlines()[shown.splitlines().index(compact) + 1]
    assert after.startswith(" " * compact.index("replace"))  # under the meaning, not column 0
