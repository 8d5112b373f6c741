"""A window learned from an overflow is kept in the database per endpoint and model: every later
process (and `doctor`) starts from it instead of overflowing again, and it is learned again when
the server's answers show it changed. Real HTTP on 127.0.0.1, real SQLite files."""

from __future__ import annotations

import random
import re
import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from app.db.location import parse_location
from app.db.windows import LearnedWindow, load_window, save_window
from app.models import make_chat_model
from app.models.window import endpoint_window, forget_windows
from graphs.shared.model_errors import classify_model_error, prompt_count_from_text
from graphs.shared.window import SAFETY_MARGIN, ContextWindow, reply_room, window_budget
from tests import overflow_replies as servers
from tests.conftest import run_cli, run_cli_process
from tests.openai_server import OpenAIServer, Reply, text
from tests.openai_server import openai_server as openai_server  # the fixture
from tests.overflow_replies import WindowedServer

MODEL = "smollm2"
WINDOW = 4096
TURNS = 12  # at most, to outgrow the window
LATER_TURNS = 10  # after it: without the kept window, some overflow again
# The fake server counts ~1.2x Waypoint's estimate (overflow_replies.CHARS_PER_TOKEN) and says so.
LEARNED = re.compile(
    r"context window: 4,096 tokens \(stated by the endpoint; it counts ~1\.\dx Waypoint's "
    r"estimate, learned 2026-06-15T10:30:00\+00:00\)"
)


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

    assert LEARNED.search(" ".join(doctor.stdout.decode().split())), doctor.stdout.decode()


def test_doctor_forgets_the_kept_window_so_the_next_overflow_teaches_it_again(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server restarted with a larger window it does not report: the user makes Waypoint learn
    it again without touching the database by hand."""
    location = parse_location(db_path)
    base_url = "http://127.0.0.1:9/v1"  # never asked: forgetting needs no server
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    kept = LearnedWindow(2048, "stated by the endpoint", True, 0.5, "2026-06-01T08:00:00+00:00")
    save_window(location, base_url, MODEL, kept)

    forgot = run_cli("doctor", "--forget-window", "--db", str(db_path))
    again = run_cli("doctor", "--forget-window", "--db", str(db_path))

    assert "forgot the 2,048-token window kept for smollm2" in forgot.stdout.decode()
    assert load_window(location, base_url, MODEL) is None
    assert "no window was kept for smollm2" in again.stdout.decode()


def test_forgetting_a_window_needs_an_openai_compatible_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    result = run_cli("doctor", "--forget-window", "--model", "offline")

    assert result.returncode == 2, result.stderr.decode()
    assert "set OPENAI_BASE_URL" in result.stderr.decode()


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


GARDEN = (
    "My allotment has four beds. The first holds tomatoes and basil, the second beans on a "
    "trellis, the third onions and garlic, and the fourth is left fallow under a mulch of straw. "
    "I water in the early morning, feed the tomatoes every second week and keep notes on what "
    "the slugs ate. "
)
REAL_TURNS = 9  # as the real-model thread (tests/test_llama_cpp_real.py)


def llama_cpp_python_refusal(prompt: int, window: int) -> Reply:
    """llama-cpp-python's 400 for a chat request with max_tokens 256 (APP_MAX_OUTPUT_TOKENS)."""
    return servers.llama_cpp_python_400(prompt, window, completion=256)


def test_a_server_that_counts_more_than_waypoint_is_not_overflowed_after_it_said_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """llama-cpp-python's chatml-function-calling format HTML-escapes the ReAct prompt's JSON, so
    the server counts ~1.5x Waypoint's estimate of a request; it refuses a streamed prompt that
    does not fit by breaking the stream off and dropping the connection, and states its count
    when asked again unstreamed. Before, later turns kept sending prompts that fitted by
    Waypoint's count only (3 of 12 turns here, 4 of 9 on the real model); and before the
    unstreamed retry skipped the dropped connection (477116e), every turn after the first overflow
    failed at once (exit 1 in 0.2 s on the real model: four 'Connection error's, no summary)."""
    monkeypatch.setenv("APP_MAX_OUTPUT_TOKENS", "256")
    with WindowedServer(
        WINDOW, llama_cpp_python_refusal, count=servers.chatml_escaped_tokens, breaks_streams=True
    ) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        outcomes = []
        for turn in range(1, REAL_TURNS + 1):
            server.add(text(f"Thought: noted\nFinal Answer: Noted, part {turn}."))
            before = len(server.overflows)
            message = f"Here are my garden notes, part {turn}: {GARDEN * 3} Please remember them."
            forget_windows()
            result = run_cli("chat", "-t", "garden", "--tool-protocol", "react", "-m", message)
            outcomes.append((result.returncode, len(server.overflows) - before))
            assert result.returncode == 0, result.stderr.decode()
    assert sum(overflows for _, overflows in outcomes) == 1, outcomes


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(
            servers.llama_cpp_python_400(5000, 4096, completion=256), id="llama-cpp-python"
        ),
        pytest.param(servers.llama_cpp_400(5000, 4096), id="llama.cpp"),
        pytest.param(servers.llama_cpp_stream_error(5000, 4096), id="llama.cpp-in-stream"),
        pytest.param(servers.vllm_400(5000, 4096), id="vllm"),
        pytest.param(servers.vllm_400_legacy(5000, 4096), id="vllm-before-0.11"),
        pytest.param(servers.openai_400(5000, 4096), id="openai"),
    ],
)
def test_the_servers_count_of_a_refused_prompt_is_read_from_its_error(
    openai_server: OpenAIServer, reply: Reply
) -> None:
    """What the margin is learned from: the refused prompt's size by the server's own count."""
    openai_server.add(reply)
    model = make_chat_model(f"openai:{MODEL}", timeout=5, base_url=openai_server.base_url)
    with pytest.raises(Exception) as caught:
        model.invoke([HumanMessage("hello")])

    error = classify_model_error(caught.value)

    assert error["kind"] == "context_overflow"
    assert prompt_count_from_text(error["message"]) == 5000


def test_the_servers_count_sets_the_margin_the_next_prompts_fit_by() -> None:
    """Waypoint counted 3,000 tokens, the server 4,500: a later prompt's estimate is held to
    what fits the window by the server's count (with the usual safety margin), and doctor says so."""
    window = ContextWindow()
    window.learn_from_overflow(4096, prompt_tokens=3000, counted=4500)

    assert window.margin == pytest.approx(SAFETY_MARGIN / 1.5)
    assert window_budget(window, 0) * 1.5 <= (WINDOW - reply_room(window)) * SAFETY_MARGIN
    assert "it counts ~1.5x Waypoint's estimate" in window.describe()

    window.learn_from_overflow(4096, prompt_tokens=2000, counted=2400)  # a lower ratio: kept
    assert window.margin == pytest.approx(SAFETY_MARGIN / 1.5)
