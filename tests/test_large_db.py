"""Listings stay correct on a database with many threads and a long thread."""

from __future__ import annotations

import io
import json

from rich.console import Console

from app.cli.render import JsonlRenderer
from app.config import load_settings
from app.service.context import make_context
from app.service.session import ChatSession
from app.store import open_checkpointer
from tests.conftest import run_cli

THREADS = 150
LONG_TURNS = 110  # past the first full snapshot of the messages (~every 25 turns)


def test_threads_list_and_history_first_page_on_a_large_database():
    settings = load_settings()
    quiet = JsonlRenderer(Console(file=io.StringIO()))
    with open_checkpointer(settings.db) as saver:
        context = make_context(settings)
        for n in range(THREADS):
            ChatSession(settings, saver, f"t{n:03d}", context).run_turn(
                f"what is {n} plus 1", quiet
            )
        long = ChatSession(settings, saver, "long", context)
        for n in range(1, LONG_TURNS + 1):
            long.run_turn(f"what is {n} plus {n}", quiet)

    listing = json.loads(run_cli("threads", "list", "--json").stdout)
    assert len(listing) == THREADS + 1
    assert listing[0]["thread_id"] == "long" and listing[0]["turns"] == LONG_TURNS
    assert [t["thread_id"] for t in listing[1:4]] == ["t149", "t148", "t147"]
    assert all(
        t["turns"] == 1 and t["title"] == f"what is {int(t['thread_id'][1:])} plus 1"
        for t in listing[1:]
    )

    page = json.loads(run_cli("history", "-t", "long", "--limit", "5", "--json").stdout)
    assert [t["turn"] for t in page] == [110, 109, 108, 107, 106]
    assert all(t["preview"] == f"what is {t['turn']} plus {t['turn']}" for t in page)
    assert all(t["status"] == "answered" and t["tools"] == ["calculator"] for t in page)

    table = run_cli("history", "-t", "long")
    assert "showing the newest 20 of 110 turns" in table.stderr.decode()
    shown = run_cli("show", "-t", "long", "--json")
    messages = json.loads(shown.stdout)["messages"]
    assert len(messages) == 4 * LONG_TURNS
    assert messages[-1]["content"] == f"{LONG_TURNS} + {LONG_TURNS} = {2 * LONG_TURNS}"
