"""Tables that fit the terminal, at 80 and 160 columns: ids are short and never cut, words are never
broken, columns are left out whole by priority, times are human, and the turn count is the head's."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from rich.text import Text

from app.cli.tables import Column, fitted_table, human_time
from tests.conftest import run_cli

ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def chat(thread: str | None, message: str) -> str:
    """One turn; returns the thread id (the generated one when `thread` is None)."""
    args = ["chat", *(["-t", thread] if thread else []), "-m", message]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr.decode()
    return thread or result.stderr.decode().split("thread ")[1].split()[0]


def widest_line(text: str) -> int:
    return max(Text(line).cell_len for line in text.splitlines())


def header_words(text: str, first: str) -> list[str]:
    return next(line for line in text.splitlines() if line.split()[:1] == [first]).split()


@pytest.fixture
def thread() -> str:
    thread = chat(None, "what is 6 times 7")
    chat(thread, "weather in Paris and Rome, which is warmer?")
    chat(thread, "what time is it? and what do you remember about my favourite colour")
    return thread


def short_ids(thread: str) -> list[str]:
    turns = json.loads(run_cli("history", "-t", thread, "--json").stdout)
    return [turn["checkpoint_id"][-12:] for turn in turns]


def test_history_at_80_columns_breaks_no_word_and_shows_whole_short_ids(thread: str):
    out = run_cli("history", "-t", thread, columns=80).stdout.decode()

    assert widest_line(out) <= 80
    headers = header_words(out, "turn")
    assert headers[:5] == ["turn", "input", "status", "tools", "checkpoint"]
    assert "retries" not in headers  # left out whole, the least important first
    for short in short_ids(thread):
        assert re.search(rf"\b{short}\b", out)
    assert "calculator" in out and "get_weather, get_weather, calculator" not in out
    assert not ISO_TIME.search(out)


def test_history_at_160_columns_has_every_column_and_one_line_per_turn(thread: str):
    out = run_cli("history", "-t", thread, columns=160).stdout.decode()

    assert widest_line(out) <= 160
    assert header_words(out, "turn") == [
        "turn",
        "input",
        "status",
        "tools",
        "checkpoint",
        "updated",
        "steps",
        "iter",
        "retries",
    ]
    row = next(line for line in out.splitlines() if "what is 6 times 7" in line)
    assert short_ids(thread)[-1] in row and "calculator" in row
    assert re.search(r"seconds? ago|\bnow\b|minutes? ago", row)


def test_a_short_id_from_the_table_works_wherever_an_id_does(thread: str):
    short = short_ids(thread)[-1]
    shown = run_cli("show", "-t", thread, "-c", short)
    assert shown.returncode == 0, shown.stderr.decode()
    assert run_cli("diff", "-t", thread, short, short_ids(thread)[0]).returncode == 0
    assert run_cli("fork", "-t", thread, "-c", short, "--to", "copy").returncode == 0


def test_threads_list_at_80_columns_never_cuts_the_generated_thread_id(thread: str):
    chat("demo", "what is 1 plus 1")

    out = run_cli("threads", "list", columns=80).stdout.decode()

    assert widest_line(out) <= 80
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", thread)
    assert re.search(rf"^\s*{thread}\s", out, re.M)
    assert header_words(out, "thread") == ["thread", "title", "turns", "updated", "size"]
    assert not ISO_TIME.search(out)


def test_threads_list_at_160_columns_names_every_column(thread: str):
    out = run_cli("threads", "list", columns=160).stdout.decode()
    assert header_words(out, "thread") == [
        "thread",
        "title",
        "turns",
        "updated",
        "size",
        "checkpoints",
    ]


def test_threads_list_shows_the_heads_turn_count_after_an_undo(database: str):
    thread = chat("undone", "what is 1 plus 1")
    chat(thread, "what is 2 plus 2")
    chat(thread, "what is 3 plus 3")
    assert run_cli("rollback", "-t", thread, "--turns", "1").returncode == 0

    [row] = json.loads(run_cli("threads", "list", "--json").stdout)

    assert row["turns"] == 2


def test_every_checkpoint_fits_80_columns_with_the_head_marked(thread: str):
    out = run_cli("history", "-t", thread, "--all", columns=80).stdout.decode()
    head = json.loads(run_cli("history", "-t", thread, "--all", "--json").stdout)[0]
    assert widest_line(out) <= 80
    assert f"* {head['checkpoint_id'][-12:]}" in out


def test_columns_are_left_out_whole_lowest_priority_first():
    columns = [Column("id"), Column("text", text=True), Column("a", 2), Column("b", 1)]
    rows = [["0123456789ab", Text("some words here"), "x" * 10, "y" * 10]]
    headers = {
        width: [c.header for c in fitted_table(columns, rows, width).columns]
        for width in (80, 50, 30, 10)
    }
    assert headers == {
        80: ["id", "text", "a", "b"],
        50: ["id", "text", "b"],
        30: ["id", "text"],
        10: ["id", "text"],
    }


def test_times_read_as_how_long_ago():
    now = datetime(2026, 6, 15, 10, 30, tzinfo=UTC)
    ago = {s: human_time((now - timedelta(seconds=s)).isoformat(), now) for s in (5, 200, 90_000)}
    assert ago == {5: "5 seconds ago", 200: "3 minutes ago", 90_000: "a day ago"}
