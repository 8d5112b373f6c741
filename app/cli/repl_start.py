"""How the REPL starts: its prompt is drawn once the command line is read, and the run is set up
(LangGraph, the database, the memory, the model and the tools: most of a second) in the background
meanwhile; the first line typed waits for it only if it is not done yet.

A thread that needs an answer before anything else (a turn waiting for an approval, a run that was
interrupted) is set up before the prompt, as it always was: `glance` tells the two apart by reading
the thread's head as data, without LangGraph.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from app.cli.database import database_of
from app.cli.recap import RecapTurn, recap_turns, said_stored
from app.config import Settings
from app.db.unreadable import UnreadableCheckpointError
from app.errors import AppError

T = TypeVar("T")


@dataclass(frozen=True)
class Glance:
    """What the banner says of a thread whose last turn ended cleanly (or that is new): its turns
    and the recap of the last ones."""

    turns: int
    recap: list[RecapTurn] = field(default_factory=list)


def glance(settings: Settings, thread_id: str) -> Glance | None:
    """The thread's head read as data: its turns and last messages, when the prompt may come at
    once; None when the thread needs the full set-up first (its last run did not end, or it cannot
    be read this way: the full set-up says why), or on PostgreSQL, whose saver loads LangGraph
    anyway."""
    if settings.database.is_postgres:
        return None
    from app.service.history import MESSAGES, StoredStates, next_nodes
    from app.service.index import CheckpointIndex

    try:
        with database_of(settings) as database:
            if not database.thread_exists(thread_id):
                return Glance(0)
            index = CheckpointIndex(database, thread_id)
            head = index.head.checkpoint_id
            states = StoredStates(database, thread_id, index.branch(), {head})
            checkpoint = states.checkpoints[head]
            pending = database.stored_writes(thread_id, [head]).get(head)
            values = states.values(head)
    except (AppError, UnreadableCheckpointError):  # the full set-up reports it
        return None
    turns = values.get("turn", 0)
    ended = bool(values.get("status")) and not next_nodes(checkpoint) and not pending
    if not ended or not isinstance(turns, int):
        return None
    return Glance(turns, recap_turns([said_stored(m) for m in values[MESSAGES]]))


def in_background(work: Callable[[], T]) -> Callable[[], T]:
    """Start `work` in a thread; the function returned waits for it and gives its result (or
    raises what it raised)."""
    values: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            values.append(work())
        except BaseException as exc:  # handed to the thread that waits for the result
            errors.append(exc)

    thread = threading.Thread(target=run, name="repl-setup", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        if errors:
            raise errors[0]
        return values[0]

    return result
