"""Memory across threads for the app: whose memory it is, opening it next to the checkpoints, and
experience memory (what earlier turns asked, which tools they used, how they ended)."""

from __future__ import annotations

import contextlib
import getpass
import logging
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence

from langchain_core.messages import AnyMessage, ToolMessage

from app.config import Settings
from app.db.location import DatabaseLocation
from app.db.sqlite import connect, database_error, is_environmental
from app.errors import UsageError
from app.store import THREAD_ID
from graphs.shared.messages import current_turn
from tools.memory import MemoryItem, MemoryStore, clean_text, query_terms

log = logging.getLogger(__name__)

MAX_EXPERIENCE_CHARS = 300
MAX_EXPERIENCES_PER_USER = 200
# Pruning lists every entry: it waits until a tenth more than the maximum have accumulated.
PRUNE_EVERY_FRACTION = 10
MAX_PROMPT_EXPERIENCES = 5
# The notes reach the model as a system section of their own (graphs/shared/messages.for_model),
# as data: a request and what came of it, in a few plain words. Never Waypoint's status names
# ("budget_exhausted", "stopped: …"), nor words about earlier conversations: a small model repeats
# either to the user as news (SmolLM2-135M spoke of "the previous conversation" in 3 of 20 answers
# under a header that named it, issue 34).
EXPERIENCE_HEADER = "Reference data (may be out of date):"
STORED_SUMMARY = re.compile(
    r"^task: (?P<task>.*?) \| tools: (?P<tools>.*?) \| outcome: .*?(?: — (?P<gist>.*))?$"
)
STORED_LESSON = re.compile(r"^lesson for: (?P<task>.*?) \| (?P<lesson>.*)$")

# A failed turn ended in the failure handler (endpoint down, rate limit, a bug): that says nothing
# about the task, and recalling it would teach later turns that the task cannot be done. A
# cancelled turn was stopped by the user before it had an outcome.
SKIPPED_STATUSES = frozenset({"failed", "cancelled"})
OUTCOMES = {
    "answered": "answered",
    "max_iterations": "stopped at the step limit",
    "loop_detected": "stopped: it repeated the same tool call",
    "budget_exhausted": "stopped: the time or token budget ran out",
    "unverified": "answered without a tool result to back it (unverified)",
    "judged_wrong": "answered, but the evaluator judged the answer wrong",
}


def validate_user(user: str) -> str:
    """A memory user id is spelled like a thread id; anything else is the caller's mistake."""
    if not THREAD_ID.fullmatch(user or "") or user in {".", ".."}:
        raise UsageError(
            f"invalid user {user[:80]!r}: use 1-64 letters, digits, '.', '_' or '-' "
            "(for example --user alice)"
        )
    return user


def default_user() -> str:
    """The OS user when that is a valid id, else "default"."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name in the environment or password db
        return "default"
    if not THREAD_ID.fullmatch(name) or name in {".", ".."}:
        return "default"
    return name


def memory_user(settings: Settings) -> str:
    """The memory namespace: --user / APP_USER, else the OS user."""
    return validate_user(settings.user) if settings.user else default_user()


@contextlib.contextmanager
def open_memory(settings: Settings) -> Iterator[MemoryStore]:
    """The long-term memory in the checkpoint database (its own tables, its own connection)."""
    location = settings.database
    if location.is_postgres:
        with _open_postgres_memory(location) as memory:
            yield memory
        return
    assert location.path is not None
    connection = connect(location.path, settings.busy_timeout)
    try:
        connection.isolation_level = None  # SqliteStore opens its own transactions
        try:
            memory = MemoryStore(connection)
        except sqlite3.DatabaseError as exc:
            raise database_error(location.path, exc) from exc
        try:
            yield memory
        except sqlite3.DatabaseError as exc:  # the same boundary as open_sqlite's
            if not is_environmental(exc):
                raise
            raise database_error(location.path, exc) from exc
    finally:
        connection.close()


@contextlib.contextmanager
def _open_postgres_memory(location: DatabaseLocation) -> Iterator[MemoryStore]:
    import psycopg

    from app.db.pg_connect import connect as connect_postgres
    from app.db.pg_connect import connection_error
    from app.db.pg_setup import migrate_once

    assert location.url is not None  # a PostgreSQL location always has its URL
    connection = connect_postgres(location)
    try:
        try:
            memory = MemoryStore(connection)
            migrate_once(connection, "memory", location.url, memory.migrate)
        except psycopg.Error as exc:
            raise connection_error(location, exc) from None
        yield memory
    finally:
        connection.close()


def tools_used_in_turn(messages: Sequence[AnyMessage]) -> list[str]:
    """Names of the tools that ran successfully in the last turn, first use first, each once."""
    names = (
        m.name
        for m in current_turn(messages)
        if isinstance(m, ToolMessage) and m.status == "success" and m.name
    )
    return list(dict.fromkeys(names))


def experience_summary(request: str, tools: Sequence[str], outcome_status: str, answer: str) -> str:
    """One line of at most MAX_EXPERIENCE_CHARS: 'task: … | tools: … | outcome: …'."""
    names = ", ".join(_clip(clean_text(n), 40) for n in list(dict.fromkeys(tools))[:6]) or "none"
    outcome = OUTCOMES.get(outcome_status, outcome_status)
    gist = _clip(clean_text(answer), 100) if outcome_status == "answered" else ""
    text = f"task: {_clip(clean_text(request), 140)} | tools: {names} | outcome: {outcome}"
    return _clip(f"{text} — {gist}" if gist else text, MAX_EXPERIENCE_CHARS)


def honest_status(
    outcome_status: str, tools_used: Sequence[str], judged_wrong: bool = False
) -> str:
    """How an answered turn really ended: a success only when the answer rests on a successful tool
    result and no evaluator judged it wrong. A model answering from its own head can be wrong
    ("17 * 23 = 340"), and recalling that as a success would spread the mistake."""
    if outcome_status != "answered":
        return outcome_status
    if judged_wrong:
        return "judged_wrong"
    return outcome_status if tools_used else "unverified"


def record_experience(
    store: MemoryStore,
    user: str,
    thread_id: str,
    turn: int,
    request: str,
    tools_used: Sequence[str],
    outcome_status: str,
    answer: str,
    *,
    judged_wrong: bool = False,
) -> None:
    """Remember how a finished turn went, honestly (`honest_status`: only a success keeps the gist
    of its answer). Failed and cancelled turns, and requests with no topic words ("thanks", "ok"),
    are skipped. One entry per thread and turn (a replay replaces it); only the newest
    MAX_EXPERIENCES_PER_USER are kept (pruned back to that once a tenth more have accumulated). A busy database skips the entry: memory is an aid, and a
    turn that is already answered must not fail because of it."""
    if outcome_status in SKIPPED_STATUSES or not query_terms(
        request, keep_stopwords_if_alone=False
    ):
        return
    outcome_status = honest_status(outcome_status, tools_used, judged_wrong)
    text = experience_summary(request, tools_used, outcome_status, answer)
    try:
        store.put(
            "experiences",
            user,
            experience_key(thread_id, turn),
            text,
            search_text=clean_text(request),
            thread_id=thread_id,
            turn=turn,
            status=outcome_status,
            tools=list(dict.fromkeys(tools_used)),
        )
        store.prune(
            "experiences",
            user,
            keep=MAX_EXPERIENCES_PER_USER,
            slack=MAX_EXPERIENCES_PER_USER // PRUNE_EVERY_FRACTION,
        )
    except sqlite3.OperationalError as exc:
        if not _busy(exc):
            raise
        log.warning("experience of turn %s of %s not recorded: %s", turn, thread_id, exc)


def experience_key(thread_id: str, turn: int, lesson: int = 0) -> str:
    """The key of a turn's experience, `<thread>:<turn>` (`…:lesson<n>` for its lesson n). Thread ids
    hold no ':' (app/store.THREAD_ID), so `thread_keys(thread)` begins that thread's keys alone."""
    return f"{thread_keys(thread_id)}{turn}" + (f":lesson{lesson}" if lesson else "")


def thread_keys(thread_id: str) -> str:
    """What the key of every experience and lesson of thread `thread_id` starts with."""
    return f"{thread_id}:"


def relevant_experiences(
    store: MemoryStore,
    user: str,
    request: str,
    limit: int = 3,
    *,
    exclude_thread: str | None = None,
) -> list[str]:
    """Summaries of the past turns most relevant to ``request`` (BM25 over their requests), best
    first, as stored; none when no topic word is shared. ``exclude_thread``: the current thread,
    whose turns the model already sees, left out by the index query (its keys start with
    `thread_keys`). A busy database gives none."""
    hits = _relevant_hits(store, user, request, limit, exclude_thread)
    return _distinct((hit.text for hit in hits), limit)


def relevant_notes(
    store: MemoryStore,
    user: str,
    request: str,
    limit: int = 3,
    *,
    exclude_thread: str | None = None,
) -> list[str]:
    """The same past turns as `relevant_experiences`, as the model reads them (`experience_note`),
    less those that taught nothing usable."""
    hits = _relevant_hits(store, user, request, limit, exclude_thread)
    return _distinct(filter(None, (experience_note(hit) for hit in hits)), limit)


def _relevant_hits(
    store: MemoryStore, user: str, request: str, limit: int, exclude_thread: str | None
) -> list[MemoryItem]:
    if limit < 1:
        return []
    try:
        return store.search(
            "experiences",
            user,
            request,
            2 * limit + 2,  # a few spare: two threads' experiences may say the same
            keep_stopwords_if_alone=False,
            skip_prefix=thread_keys(exclude_thread) if exclude_thread else "",
        )
    except sqlite3.OperationalError as exc:
        if not _busy(exc):
            raise
        log.warning("past experiences not consulted: %s", exc)
        return []


def _distinct(texts: Iterable[str], limit: int) -> list[str]:
    chosen: dict[str, None] = {}  # distinct texts, best first
    for text in texts:
        chosen[_clip(clean_text(text), MAX_EXPERIENCE_CHARS)] = None
        if len(chosen) == limit:
            break
    return list(chosen)


def experience_note(item: MemoryItem) -> str:
    """One past turn as data: `"the request" → what came of it` (the tools it used and the gist of
    its checked answer, or a lesson learned from it). "" for a request that was not finished, or
    answered without a tool (an unchecked answer is not passed on): it taught nothing usable."""
    status = str(item.fields.get("status", ""))
    if status == "lesson" and (lesson := STORED_LESSON.match(item.text)):
        return f'"{lesson["task"]}" → lesson: {lesson["lesson"]}'
    summary = STORED_SUMMARY.match(item.text)
    if summary is None:  # not written by experience_summary: shown as it is
        return item.text
    asked = f'"{summary["task"]}" →'
    if status == "judged_wrong":
        return f"{asked} the answer given then was wrong."
    if status != "answered":
        return ""
    tools = [t for t in item.fields.get("tools") or [] if isinstance(t, str)]
    result = f'"{summary["gist"]}"' if summary["gist"] else "answered"
    return f"{asked} {', '.join(tools[:6])}: {result}" if tools else f"{asked} {result}"


def experience_prompt(experiences: Sequence[str]) -> str:
    """The turn's background section, or "" when there is nothing relevant: a header and at most
    MAX_PROMPT_EXPERIENCES single-line entries of at most MAX_EXPERIENCE_CHARS."""
    entries = [_clip(clean_text(e), MAX_EXPERIENCE_CHARS) for e in experiences]
    entries = [e for e in entries if e][:MAX_PROMPT_EXPERIENCES]
    if not entries:
        return ""
    return "\n".join([EXPERIENCE_HEADER, *(f"- {e}" for e in entries)])


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)
