"""Stored text never drives the terminal: a message, a title, a tool argument or a memory holding
ESC sequences (any HTTP client of `serve` can store one) is printed escaped by every command that
shows it, through the one function every printer uses (app/text.py `shown`)."""

from __future__ import annotations

import json
import re

import pytest

from app.text import shown
from tests.conftest import run_cli

# Retitle the window, clear the screen, a C1 CSI (0x9b), BEL, a backspace, a right-to-left override.
HOSTILE = "Ada \x1b]0;PWNED\x07 \x1b[2J\x9b31m \x08\u202e end"
# Every C0 and C1 control but newline and tab: what must never reach the terminal raw.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")


def _printed(*args: str) -> str:
    result = run_cli(*args, columns=80)
    assert result.returncode == 0, (args, result.stderr.decode())
    return result.stdout.decode() + result.stderr.decode(errors="replace")


def _assert_escaped(command: tuple[str, ...], output: str) -> None:
    raw = RAW_CONTROL.search(output)
    assert raw is None, f"{' '.join(command)} printed {raw.group()!r} raw:\n{output}"


@pytest.fixture
def hostile_thread() -> list[str]:
    """A thread whose requests, title, tool arguments and memory hold control sequences; the
    chat's own output, collected as it was stored."""
    said = [
        _printed("chat", "-t", "evil", "-m", f"remember that my name is {HOSTILE}"),
        _printed("chat", "-t", "evil", "-m", f"what is 2+3 {HOSTILE}"),
        _printed(
            "chat", "-t", "evil", "--approve", "auto", "-m", f"write '{HOSTILE}' to notes.txt"
        ),
    ]
    return said


def test_no_command_prints_a_stored_control_sequence_raw(hostile_thread: list[str]):
    for output in hostile_thread:
        _assert_escaped(("chat",), output)
    rows = json.loads(run_cli("history", "-t", "evil", "--all", "--json").stdout)
    newest, oldest = rows[0]["checkpoint_id"], rows[-1]["checkpoint_id"]
    commands = [
        ("history", "-t", "evil"),
        ("history", "-t", "evil", "--all"),
        ("history", "-t", "evil", "--tree"),
        ("threads", "list"),
        ("show", "-t", "evil"),
        ("diff", "-t", "evil", oldest, newest),
        ("export", "-t", "evil", "--format", "md"),
        ("export", "-t", "evil"),
        ("memory", "list"),
        ("memory", "search", "Ada"),
        ("rollback", "-t", "evil", "--turns", "1"),
        ("history", "-t", "evil", "--tree"),
        ("fork", "-t", "evil", "--to", "evil-copy"),
        ("threads", "list"),
    ]
    for command in commands:
        output = _printed(*command)
        _assert_escaped(command, output)
    assert "\\x1b]0;PWNED\\x07" in _printed("history", "-t", "evil-copy")  # shown, escaped


def test_corpus_commands_print_a_hostile_document_escaped(isolated):
    document = isolated / "hostile.md"
    document.write_text(f"# Title {HOSTILE}\n\nParis notes {HOSTILE} and more words.\n")
    for command in (
        ("corpus", "add", str(document)),
        ("corpus", "list"),
        ("corpus", "search", "Paris notes"),
        ("chat", "-t", "s", "-m", "search for Paris notes"),
    ):
        _assert_escaped(command, _printed(*command))


def test_what_an_http_client_of_serve_stores_is_printed_escaped():
    from fastapi.testclient import TestClient

    from app.config import load_settings
    from app.server.api import create_app

    client = TestClient(create_app(load_settings()), base_url="http://localhost")
    client.post("/threads", json={"thread_id": "web"})
    body = {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": f"what is 6 times 7 {HOSTILE}"}]},
    }
    assert client.post("/threads/web/runs/wait", json=body).status_code == 200
    for command in (
        ("history", "-t", "web"),
        ("history", "-t", "web", "--tree"),
        ("threads", "list"),
        ("show", "-t", "web"),
        ("export", "-t", "web", "--format", "md"),
    ):
        output = _printed(*command)
        _assert_escaped(command, output)
    assert "\\x1b]0;PWNED\\x07" in _printed("export", "-t", "web", "--format", "md")


def test_the_one_escaping_function_keeps_line_breaks_and_tabs_and_escapes_the_rest():
    assert shown("a\tb\nc\r\nd") == "a\tb\nc\nd"
    assert shown(HOSTILE) == "Ada \\x1b]0;PWNED\\x07 \\x1b[2J\\x9b31m \\x08\\u202e end"
    assert shown("one\ntwo\tthree", one_line=True) == "one ⏎ two three"
