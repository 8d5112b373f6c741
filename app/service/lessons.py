"""Reflexion lessons in long-term memory: saved with the user's experiences after a turn, so the
relevant ones reach the prompt of later threads the way past experiences do (app/service/memory.py)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence

from app.service.memory import experience_key
from tools.memory import MemoryStore, clean_text

log = logging.getLogger(__name__)

MAX_LESSON_CHARS = 300


def lesson_text(request: str, lesson: str) -> str:
    """One line: 'lesson for: <task> | <lesson>'."""
    text = f"lesson for: {clean_text(request)[:120]} | {clean_text(lesson)}"
    return text if len(text) <= MAX_LESSON_CHARS else text[: MAX_LESSON_CHARS - 1] + "…"


def record_lessons(
    store: MemoryStore | None,
    user: str,
    thread_id: str,
    turn: int,
    request: str,
    lessons: Sequence[str],
) -> None:
    """Save a turn's lessons as experiences (found by the request's and the lesson's words). A busy
    database skips them: memory is an aid and the turn is already answered."""
    if store is None:
        return
    try:
        for number, lesson in enumerate(lessons, 1):
            store.put(
                "experiences",
                user,
                experience_key(thread_id, turn, number),
                lesson_text(request, lesson),
                search_text=clean_text(f"{request} {lesson}"),
                thread_id=thread_id,
                turn=turn,
                status="lesson",
            )
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        log.warning("lessons of turn %s of %s not recorded: %s", turn, thread_id, exc)
