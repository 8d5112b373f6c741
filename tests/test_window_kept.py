"""A window learned from an overflow is kept in the database per endpoint and model: every later
process (and `doctor`) starts from it instead of overflowing again, and it is learned again when
the server's answers show it changed. Real HTTP on 127.0.0.1, real SQLite files."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from app.db.location import parse_location
from app.db.windows import LearnedWindow, load_window, save_window
from app.models.window import endpoint_window, forget_windows
from tests import overflow_replies as servers
from tests.conftest import run_cli, run_cli_process
from tests.openai_server import text
from tests.overflow_replies import WindowedServer

MODEL = "smollm2"
WINDOW = 4096
TURNS = 12  # at most, to outgrow the window
LATER_TURNS = 10  # after it: without the kept window, some overflow again
LEARNED = "4,096 tokens (stated by the endpoint, learned 2026-06-15T10:30:00+00:00)"


@pytest.fixture(autouse=True)
def endpoint_env(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("APP_MODEL", f"openai:{MODEL}")
    forget_windows()


def note(turn: int) -> str:
    pick = random.Random(turn).choice
    garden = ("tomatoes", "basil", "compost", "mulch", "trellis", "seeds", "water", "sunlight")
    return f"Note {turn}: " + " ".join(pick(garden) for _ in range(150))


def new_process_turn(message: str) -> tuple[int, str]:
    """One `chat -m` turn as a fresh process sees it: nothing of the window in memory."""
    forget_windows()
    result = run_cli("chat", "-t", "garden", "-m", message, columns=10_000)
    return result.returncode, result.stderr.decode()


def grow_until_an_overflow(server: WindowedServer) -> int:
    """Turns, each a new process, until the server refused one as too long; the last turn."""
    turn = 0
    while not server.overflows:
        turn += 1
        assert turn <= TURNS, "the thread never outgrew the window"
        server.add(text(f"Answer {turn}."))
        code, err = new_process_turn(note(turn))
        assert code == 0, err
    return turn


def test_a_window_one_process_learned_is_not_overflowed_by_the_next_ones(
    monkeypatch: pytest.MonkeyPatch, db_path: Path
) -> None:
    """llama-cpp-python's server reports no window. Before, every process learned it again from an
    overflow of its own (18 of 24 turns of a long thread sent a too-long prompt first)."""
    with WindowedServer(WINDOW, servers.llama_cpp_python_400) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        learned = grow_until_an_overflow(server)
        for turn in range(learned + 1, learned + LATER_TURNS + 1):
            server.add(text(f"Answer {turn}."))
            code, err = new_process_turn(note(turn))
            assert code == 0, err
        assert len(server.overflows) == 1, [len(r.messages) for r in server.overflows]
        base_url = server.base_url

        server.add(text("Still here."))
        last = run_cli_process("chat", "-t", "garden", "-m", note(turn + 1))  # a real process

        assert last.returncode == 0, last.stderr.decode()
        assert len(server.overflows) == 1
    stored = load_window(parse_location(db_path), base_url, MODEL)
    assert stored is not None and (stored.tokens, stored.exact) == (WINDOW, True)
    assert stored.learned_at == "2026-06-15T10:30:00+00:00"


def test_doctor_reports_the_learned_window_with_how_and_when(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with WindowedServer(WINDOW, servers.llama_cpp_python_400) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        grow_until_an_overflow(server)
        forget_windows()

        server.add(text("pong"))
        doctor = run_cli("doctor", "--ping")

    assert f"context window: {LEARNED}" in " ".join(doctor.stdout.decode().split())


def test_a_smaller_window_stated_later_replaces_the_kept_one(db_path: Path) -> None:
    location = parse_location(db_path)
    with WindowedServer(2048, servers.llama_cpp_python_400) as server:
        kept = LearnedWindow(
            WINDOW, "stated by the endpoint", True, 0.85, "2026-06-01T08:00:00+00:00"
        )
        save_window(location, server.base_url, MODEL, kept)
        window = endpoint_window(server.base_url, MODEL, database=location)
        assert (window.tokens, window.proven) == (WINDOW, True)

        window.learn_from_overflow(2048, prompt_tokens=3000)  # the server restarted with -c 2048

        stored = load_window(location, server.base_url, MODEL)
    assert stored is not None
    assert (stored.tokens, stored.learned_at) == (2048, "2026-06-15T10:30:00+00:00")


def test_a_window_the_server_reports_wins_over_a_kept_one_that_differs(db_path: Path) -> None:
    location = parse_location(db_path)
    with WindowedServer(8192, servers.llama_cpp_400) as server:
        servers.advertise_llama_cpp(server, MODEL, n_ctx=8192, n_ctx_train=32768)
        kept = LearnedWindow(
            WINDOW, "stated by the endpoint", True, 0.85, "2026-06-01T08:00:00+00:00"
        )
        save_window(location, server.base_url, MODEL, kept)

        window = endpoint_window(server.base_url, MODEL, database=location)

        assert load_window(location, server.base_url, MODEL) is None
    assert (window.tokens, window.source, window.proven) == (8192, "llama.cpp /props", False)


def test_a_row_that_makes_no_sense_is_ignored(db_path: Path) -> None:
    """Anyone who can write the database could plant a one-token window: it is not used."""
    location = parse_location(db_path)
    kept = LearnedWindow(WINDOW, "stated by the endpoint", True, 0.85, "2026-06-01T08:00:00+00:00")
    save_window(location, "http://127.0.0.1:9/v1", MODEL, kept)
    with sqlite3.connect(db_path) as connection:
        connection.execute("UPDATE waypoint_windows SET tokens = 1")
    connection.close()

    assert load_window(location, "http://127.0.0.1:9/v1", MODEL) is None


def test_reading_a_window_creates_no_database(tmp_path: Path) -> None:
    location = parse_location(tmp_path / "absent" / "agent.sqlite")
    assert load_window(location, "http://127.0.0.1:9/v1", MODEL) is None
    assert not (tmp_path / "absent").exists()


def test_the_window_is_kept_on_postgresql_too(pg_url: str) -> None:
    location = parse_location(pg_url)
    base_url = "http://127.0.0.1:9/v1"
    assert load_window(location, base_url, MODEL) is None
    kept = LearnedWindow(WINDOW, "stated by the endpoint", True, 0.85, "2026-06-01T08:00:00+00:00")
    save_window(location, base_url, MODEL, kept)
    save_window(location, base_url, MODEL, kept)  # a second process learning it too

    assert load_window(location, base_url, MODEL) == kept
