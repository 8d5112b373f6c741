"""Nodes write only the state fields they change (graphs/shared/changes.py): an unchanged counter is
not stored again every step, and what the state holds is the same."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

from rich.console import Console

from app.cli.render import JsonlRenderer
from app.config import load_settings
from app.service.runtime import open_runtime
from graphs.shared.changes import changes_only


def test_a_node_update_keeps_changes_and_messages_and_drops_what_is_equal():
    def node(state: dict, runtime: object) -> dict:
        return {"messages": ["m"], "retry_count": 0, "iteration": 3, "status": None, "new": 1}

    state = {"messages": [], "retry_count": 0, "iteration": 2, "status": None}
    assert changes_only(node)(state, None) == {"messages": ["m"], "iteration": 3, "new": 1}


def test_a_turn_without_errors_stores_no_write_of_its_unchanged_counters(isolated: Path):
    settings = load_settings()
    with open_runtime(settings) as runtime:
        session = runtime.session("c")
        for text in ("what is 6 times 7", "what is 2 plus 2"):
            result = session.run_turn(text, JsonlRenderer(Console(file=io.StringIO())))
            assert result.status == "answered"
        values = session.head.load().values
    assert (values["turn"], values["iteration"], values["retry_count"]) == (2, 2, 0)
    assert values["last_error"] is None and values["budget_exhausted"] is None
    with sqlite3.connect(settings.database.path) as db:
        written = dict(db.execute("SELECT channel, COUNT(*) FROM writes GROUP BY channel"))
    # never anything but None: written once, when the first turn created the field
    assert written.get("last_error", 0) <= 1 and written.get("budget_exhausted", 0) <= 1
    assert written["iteration"] <= 2 * 2  # each model step, per turn (the first begins the turn)
