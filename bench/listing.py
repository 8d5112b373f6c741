"""`threads list` and `history` (first page), done Waypoint's way and the plain LangGraph way.

Waypoint's functions are what its CLI commands do minus printing. The baseline has no thread
listing API: it finds thread ids with one SQL query (every app on `SqliteSaver` must) and loads each
thread's head with `get_state` for its title and turn count; its history reads one page of
`get_state_history(limit=...)`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

FIRST_PAGE = 20  # turns per history page (Waypoint's DEFAULT_TURNS_SHOWN)
# The prebuilt agent writes 5 checkpoints per one-tool turn. `get_state_history` without `limit`
# deserialises every checkpoint of the thread before yielding the first (on the baseline's
# 1,000-turn thread that is millions of messages and tens of GB), so the plain way pages with it.
BASELINE_CHECKPOINTS_PER_TURN = 5


def waypoint_threads(db_path: Path) -> list[Any]:
    from app.config import load_settings
    from app.db import open_database
    from app.service.threads import list_threads

    settings = load_settings(db=db_path)
    with open_database(settings.db, settings.busy_timeout) as database:
        return list_threads(database)


def waypoint_history(db_path: Path, thread_id: str) -> list[Any]:
    from app.config import load_settings
    from app.db import open_database
    from app.service.api import history

    settings = load_settings(db=db_path)
    with open_database(settings.db, settings.busy_timeout) as database:
        return history(database, thread_id, FIRST_PAGE).turns


def baseline_threads(db_path: Path) -> list[dict]:
    from bench.runners import baseline_saver, create_baseline_agent

    saver = baseline_saver(db_path)
    try:
        graph = create_baseline_agent(saver)
        thread_ids = [
            row[0]
            for row in saver.conn.execute(
                "SELECT thread_id FROM checkpoints GROUP BY thread_id "
                "ORDER BY MAX(checkpoint_id) DESC"
            )
        ]
        listing = []
        for thread_id in thread_ids:
            state = graph.get_state({"configurable": {"thread_id": thread_id}})
            messages = state.values.get("messages", [])
            listing.append(
                {
                    "thread_id": thread_id,
                    "title": str(messages[0].content)[:80] if messages else "",
                    "turns": sum(1 for m in messages if m.type == "human"),
                    "updated_at": state.created_at,
                }
            )
        return listing
    finally:
        saver.conn.close()


def baseline_history(db_path: Path, thread_id: str) -> list[dict]:
    """The newest FIRST_PAGE turns: one `get_state_history` page back to the FIRST_PAGE-th input."""
    from bench.runners import baseline_saver, create_baseline_agent

    saver = baseline_saver(db_path)
    try:
        graph = create_baseline_agent(saver)
        turns: list[dict] = []
        steps = 0
        config = {"configurable": {"thread_id": thread_id}}
        page = BASELINE_CHECKPOINTS_PER_TURN * FIRST_PAGE
        for snapshot in graph.get_state_history(config, limit=page):
            steps += 1
            if (snapshot.metadata or {}).get("source") != "input":
                continue
            messages = snapshot.values.get("messages", [])
            turns.append({"checkpoint_id": snapshot.config["configurable"]["checkpoint_id"]})
            turns[-1]["steps"], steps = steps, 0
            turns[-1]["messages"] = len(messages)
            if len(turns) == FIRST_PAGE:
                break
        return turns
    finally:
        saver.conn.close()


def thread_ids(db_path: Path) -> list[str]:
    connection = sqlite3.connect(db_path)
    try:
        return [r[0] for r in connection.execute("SELECT DISTINCT thread_id FROM checkpoints")]
    finally:
        connection.close()
