"""Long-term memory across threads: per-user facts (and experiences) in LangGraph's SqliteStore or
PostgresStore, ranked by BM25 over this module's own index (`tools.memory_index`: the FTS5 table
`memory_fts`, or `memory_terms` in PostgreSQL), kept in the same database.

Invariant: an index row is written before its item and deleted after it, so every stored item is
searchable; a row orphaned by a crash in between is harmless, since results are read from the store.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import GetOp, Item, PutOp
from langgraph.store.sqlite import SqliteStore
from pydantic import BaseModel, Field

from tools.errors import ToolError, ToolInputError, ToolLimitError
from tools.memory_index import Fts5Index, MemoryIndex, PostgresTermIndex

POSTGRES_URL = ("postgresql://", "postgres://")

Kind = Literal["memories", "experiences"]

MAX_FACT_CHARS = 500
MAX_MEMORIES_PER_USER = 1000
MAX_RECALL = 20
MAX_INDEX_CHARS = 2000  # of a text, only the start is indexed or searched for
MAX_QUERY_TERMS = 32
USER_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

_LIST_CAP = 10_000
_PAGE = 1000
_DEDUPE_TRAILING = " .!?。！？"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# Words that carry no topic: dropped from queries, so "what is my name" does not match every fact
# containing "is" or "my". The index keeps them; only the query side filters.
_STOPWORD_TEXT = """
a about after again all also am an and any anything are as at be been before being both but by can
could did do does doing done for from had has have having he her here hers hi hello hey him his how
i if in into is it its just know let me mine more most my no not now of off ok okay on once only or
our ours please recall remember said say she should so some something tell than thank thanks that
the their theirs them then there these they this those to too up us very was we were what when
where which who whom whose why will with would yes yet you your yours
什么 怎么 一个 我的 你的 可以 这个 那个 我们 你们 他们 是不 不是 的 了 是 我 你 他 她 吗 呢 吧 啊 在 和 有 也 都 就
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_CJK_RANGES = (
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x2EBEF),  # CJK Extensions B-F
)


@dataclass(frozen=True)
class MemoryItem:
    """One remembered fact or experience, as stored.

    Times are naive UTC, as the store keeps them; ``saved_at`` (epoch seconds) orders items saved
    within the same second. ``score`` is the BM25 relevance of a search hit (higher is more
    relevant); ``existing`` is True when ``remember`` found the same fact already stored;
    ``fields`` holds the rest of the stored value (for experiences: thread_id, turn, status, tools).
    """

    key: str
    text: str
    created_at: datetime
    updated_at: datetime
    saved_at: float = 0.0
    score: float | None = None
    existing: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key": self.key,
            "text": self.text,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            **self.fields,
        }
        if self.score is not None:
            data["score"] = round(self.score, 6)
        return data


def user_label(user: str) -> str:
    """The namespace label of a user id: store labels may not contain '.', which user ids may, so
    '.' is written as '%2E' ('%' never occurs in a valid id, so the mapping is one-to-one)."""
    if not USER_ID.fullmatch(user or "") or user in {".", ".."}:
        raise ValueError(f"invalid memory user {str(user)[:80]!r}: use 1-64 of A-Z a-z 0-9 . _ -")
    return user.replace(".", "%2E")


def clean_text(text: str) -> str:
    """One line of valid UTF-8: lone surrogates replaced, control characters and runs of
    whitespace collapsed to single spaces."""
    text = _LONE_SURROGATE.sub("\ufffd", text)  # cannot be encoded, so cannot be stored
    text = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text)
    return " ".join(text.split())


def fact_key(fact: str) -> str:
    """Identical facts (ignoring case, spacing and a trailing full stop) get the same key."""
    normal = unicodedata.normalize("NFKC", clean_text(fact)).casefold().rstrip(_DEDUPE_TRAILING)
    return hashlib.sha256(normal.encode()).hexdigest()[:16]


def index_terms(text: str) -> list[str]:
    """The terms a text is indexed under: case-folded words (plural 's' dropped) and, since CJK
    scripts write words without spaces, every CJK character and every pair of adjacent ones."""
    terms: list[str] = []
    for run, cjk in _runs(text[:MAX_INDEX_CHARS]):
        if cjk:
            terms.extend(run)
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            terms.append(_stem(run))
    return terms


def query_terms(text: str, *, keep_stopwords_if_alone: bool = True) -> list[str]:
    """Distinct search terms of a query: words, and CJK character pairs (a lone CJK character is
    its own term). Stopwords are dropped unless they are all there is and keep_stopwords_if_alone."""
    terms: list[str] = []
    common: list[str] = []
    for run, cjk in _runs(text[:MAX_INDEX_CHARS]):
        pieces = ([run[i : i + 2] for i in range(len(run) - 1)] or [run]) if cjk else [run]
        for piece in pieces:
            (common if piece in STOPWORDS else terms).append(piece if cjk else _stem(piece))
    chosen = terms or (common if keep_stopwords_if_alone else [])
    return list(dict.fromkeys(chosen))[:MAX_QUERY_TERMS]


def _runs(text: str) -> Iterator[tuple[str, bool]]:
    """Maximal runs of letters, digits and marks, split where CJK and other scripts meet."""
    text = unicodedata.normalize("NFKC", text).casefold()
    run: list[str] = []
    run_cjk = False
    for ch in text:
        if unicodedata.category(ch)[0] in "LNM":
            cjk = _is_cjk(ch)
            if run and cjk != run_cjk:
                yield "".join(run), run_cjk
                run = []
            run.append(ch)
            run_cjk = cjk
        elif run:
            yield "".join(run), run_cjk
            run = []
    if run:
        yield "".join(run), run_cjk


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _rowid(kind: str, label: str, key: str) -> int:
    digest = hashlib.sha256(f"{kind}\x00{label}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # a positive 63-bit rowid, one per item


def connect(path: Path, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """A connection for a MemoryStore: autocommit (SqliteStore opens its own transactions),
    shareable across threads, WAL, waiting up to busy_timeout seconds for other writers.
    A new file is created private (0600), like the checkpoint database it usually is."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    connection = sqlite3.connect(
        path, timeout=busy_timeout, check_same_thread=False, isolation_level=None
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        _use_wal(connection, busy_timeout)
        connection.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        connection.close()
        raise
    return connection


def _use_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch a new database to WAL. The switch needs an exclusive lock and SQLite does not wait
    for it (no busy handler), so processes opening a new file together retry until the timeout."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


class MemoryStore:
    """Per-user facts and experiences: items in a SqliteStore under ``(kind, user)``, searchable
    through ``self.index``. Safe to share between threads (one connection, serialised)."""

    def __init__(self, connection: Any) -> None:
        if isinstance(connection, sqlite3.Connection):
            if connection.isolation_level is not None:
                raise ValueError(
                    "MemoryStore needs an autocommit connection (isolation_level=None)"
                )
            self.store: Any = SqliteStore(connection)
            _setup_store(self.store)
            self.index: MemoryIndex = Fts5Index(connection, self.store.lock)
        else:  # a psycopg connection (autocommit, dict rows), as PostgresStore requires
            from langgraph.store.postgres import PostgresStore

            self.store = PostgresStore(connection)
            self.index = PostgresTermIndex(connection, self.store.lock)
        # Serialises compound writes (check, index, put) within this process; across processes
        # identical facts map to identical keys and rowids, so racing writers converge.
        self._writing = threading.RLock()
        if not isinstance(connection, sqlite3.Connection):
            self.store.setup()  # the opener serialises first runs across processes
        self._create_index()

    def _create_index(self) -> None:
        if self.index.create():
            self.reindex()

    @classmethod
    @contextlib.contextmanager
    def open(cls, path: Path | str, busy_timeout: float = 5.0) -> Iterator[MemoryStore]:
        """A MemoryStore on its own connection to ``path`` (typically the checkpoint database),
        or to the PostgreSQL database of a postgresql:// URL."""
        if isinstance(path, str) and path.startswith(POSTGRES_URL):
            import psycopg
            from psycopg.rows import dict_row

            connection: Any = psycopg.connect(
                path, autocommit=True, prepare_threshold=0, row_factory=dict_row
            )
        else:
            connection = connect(Path(path), busy_timeout)
        try:
            yield cls(connection)
        finally:
            connection.close()

    # Facts ("memories") -------------------------------------------------------------------------

    def remember(self, user: str, text: str) -> MemoryItem:
        """Save a fact for ``user``; an identical fact already saved is returned with existing=True."""
        fact = clean_text(text)
        if not fact:
            raise ToolInputError(
                "the fact is empty; give one self-contained fact, e.g. "
                "'The user's favourite colour is teal'"
            )
        if len(fact) > MAX_FACT_CHARS:
            raise ToolLimitError(
                f"the fact is {len(fact)} characters, over the {MAX_FACT_CHARS}-character limit; "
                "nothing was saved; save one short fact per call"
            )
        key = fact_key(fact)
        with self._writing:
            found = self.get("memories", user, key)
            if found is not None:
                self._index("memories", user_label(user), key, found.text)  # repairs a lost row
                return replace(found, existing=True)
            if self.count("memories", user) >= MAX_MEMORIES_PER_USER:
                raise ToolLimitError(
                    f"long-term memory already holds {MAX_MEMORIES_PER_USER} facts for this user; "
                    "nothing was saved; tell the user to remove old ones with "
                    "`waypoint memory forget`"
                )
            return self.put("memories", user, key, fact)

    def recall(self, user: str, query: str, limit: int = 5) -> list[MemoryItem]:
        """The facts of ``user`` most relevant to ``query``, best first (BM25)."""
        return self.search("memories", user, query, limit)

    def forget(self, user: str, key_or_query: str, *, kind: Kind = "memories") -> int:
        """Delete the item with this key, else every item containing all the query's words;
        returns how many were deleted."""
        return self.delete(
            kind, user, [item.key for item in self.matching(user, key_or_query, kind)]
        )

    def matching(self, user: str, key_or_query: str, kind: Kind = "memories") -> list[MemoryItem]:
        """What ``forget`` would delete: the item with this exact key, else the items containing
        every word of the query (all, not any: forgetting must not sweep up loosely related facts)."""
        if key_or_query.strip():
            by_key = self.get(kind, user, key_or_query.strip())
            if by_key is not None:
                return [by_key]
        return self.search(
            kind, user, key_or_query, _LIST_CAP, require_all=True, keep_stopwords_if_alone=False
        )

    # Any kind -----------------------------------------------------------------------------------

    def put(
        self,
        kind: Kind,
        user: str,
        key: str,
        text: str,
        *,
        search_text: str | None = None,
        **fields: Any,
    ) -> MemoryItem:
        """Store (or replace) an item whose ``text`` is shown and whose ``search_text`` (default:
        the text) is what searches match."""
        label = user_label(user)
        value = {"text": text, "saved_at": time.time(), **fields}
        if search_text is not None:
            value["search_text"] = search_text[:MAX_INDEX_CHARS]
        with self._writing:
            self._index(kind, label, key, search_text if search_text is not None else text)
            self.store.put((kind, label), key, value)
            stored = self.store.get((kind, label), key)
        if stored is None:  # deleted by another process in the meantime
            return _to_memory_item(
                Item(
                    value=value,
                    key=key,
                    namespace=(kind, label),
                    created_at=_utc_now(),
                    updated_at=_utc_now(),
                )
            )
        return _to_memory_item(stored)

    def get(self, kind: Kind, user: str, key: str) -> MemoryItem | None:
        item = self.store.get((kind, user_label(user)), key)
        return _to_memory_item(item) if item is not None else None

    def search(
        self,
        kind: Kind,
        user: str,
        query: str,
        limit: int = 5,
        *,
        require_all: bool = False,
        keep_stopwords_if_alone: bool = True,
    ) -> list[MemoryItem]:
        """Items of ``user`` matching any (or all) of the query's terms, best first."""
        label = user_label(user)
        terms = query_terms(query, keep_stopwords_if_alone=keep_stopwords_if_alone)
        if not terms or limit < 1:
            return []
        # a few spare for rows orphaned by a crash
        rows = self.index.search(kind, label, terms, require_all, limit + 8)
        scores = dict(rows)
        found = self.store.batch([GetOp((kind, label), key) for key in scores]) if scores else []
        hits = [
            replace(_to_memory_item(item), score=scores[item.key])
            for item in found
            if item is not None
        ]
        return hits[:limit]

    def count(self, kind: Kind, user: str) -> int:
        return self.index.count(kind, user_label(user))

    def delete(self, kind: Kind, user: str, keys: Iterable[str]) -> int:
        """Delete these items (missing keys are ignored); returns how many existed."""
        label = user_label(user)
        keys = list(dict.fromkeys(keys))
        if not keys:
            return 0
        with self._writing:
            existing = [i for i in self.store.batch([GetOp((kind, label), k) for k in keys]) if i]
            self.store.batch([PutOp((kind, label), key, None) for key in keys])
            self.index.delete([_rowid(kind, label, key) for key in keys])
        return len(existing)

    def prune(self, kind: Kind, user: str, keep: int) -> int:
        """Delete all but the ``keep`` newest items; returns how many were deleted."""
        if self.count(kind, user) <= keep:
            return 0
        return self.delete(kind, user, [item.key for item in self.list(user, kind=kind)[keep:]])

    def reindex(self) -> int:
        """Index every stored item (when the index is new or suspect); returns how many. Additive:
        rows of concurrent writers are never removed, and orphan rows are harmless."""
        rows = []
        for kind in ("memories", "experiences"):
            offset = 0
            while page := self.store.search((kind,), limit=_PAGE, offset=offset):
                for item in page:
                    if len(item.namespace) == 2 and isinstance(item.value.get("text"), str):
                        text = item.value.get("search_text") or item.value["text"]
                        rows.append(_index_row(kind, item.namespace[1], item.key, text))
                offset += len(page)
        if rows:
            self.index.upsert(rows)
        return len(rows)

    def _index(self, kind: Kind, label: str, key: str, text: str) -> None:
        self.index.upsert([_index_row(kind, label, key, text)])

    # Defined last: inside the class body, `list` names this method from here on.
    def list(self, user: str, *, kind: Kind = "memories") -> builtins.list[MemoryItem]:
        """Every item of ``user``, newest first."""
        namespace = (kind, user_label(user))
        items = [
            _to_memory_item(item)
            for item in self.store.search(namespace, limit=_LIST_CAP)
            if item.namespace == namespace
        ]
        return sorted(items, key=lambda i: (i.saved_at, i.created_at), reverse=True)


def _index_row(kind: str, label: str, key: str, text: str) -> tuple[int, str, str, str, str]:
    return (_rowid(kind, label, key), " ".join(index_terms(text)), kind, label, key)


def _to_memory_item(item: Item) -> MemoryItem:
    value = dict(item.value)
    text = value.pop("text", "")
    saved_at = value.pop("saved_at", 0.0)
    value.pop("search_text", None)
    return MemoryItem(
        key=item.key,
        text=text if isinstance(text, str) else str(text),
        created_at=_naive_utc(item.created_at),
        updated_at=_naive_utc(item.updated_at),
        saved_at=saved_at if isinstance(saved_at, int | float) else 0.0,
        fields=value,
    )


def _naive_utc(moment: datetime) -> datetime:
    """PostgresStore gives aware times, SqliteStore naive UTC ones: items carry naive UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


def _setup_store(store: SqliteStore, attempts: int = 5) -> None:
    """Run the store's migrations. Two processes opening a new database at once can both try the
    same migration; the loser sees a duplicate and simply re-reads the version and carries on."""
    for attempt in range(attempts):
        try:
            store.setup()
            return
        except (sqlite3.IntegrityError, sqlite3.OperationalError) as exc:
            raced = isinstance(exc, sqlite3.IntegrityError) or "duplicate column" in str(exc)
            if not raced or attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


@contextlib.contextmanager
def memory_errors_as_tool_errors() -> Iterator[None]:
    """A database held by another writer past the busy timeout is for the model to work around."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        raise ToolError(
            "long-term memory is busy (another Waypoint process is writing to it); "
            "try again in a moment, or carry on without it"
        ) from exc


class RememberArgs(BaseModel):
    fact: str = Field(
        description="One self-contained fact in plain words, e.g. 'The user's favourite colour "
        f"is teal' (at most {MAX_FACT_CHARS} characters)."
    )


class RecallArgs(BaseModel):
    query: str = Field(description="Words to look for, e.g. 'favourite colour'.")
    limit: int = Field(default=5, ge=1, le=MAX_RECALL, description="At most this many facts.")


def format_recall(query: str, items: Sequence[MemoryItem]) -> str:
    """A numbered list, best first, e.g. '1. The user's favourite colour is teal (saved 2025-01-31)'."""
    if not items:
        shown = clean_text(query)
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        return f"nothing remembered about '{shown}'"
    return "\n".join(
        f"{n}. {item.text} (saved {item.created_at:%Y-%m-%d})" for n, item in enumerate(items, 1)
    )


def make_memory_tools(store: MemoryStore, user: str) -> builtins.list[BaseTool]:
    """Build the remember and recall tools, bound to ``user``'s long-term memory in ``store``."""
    user_label(user)

    def remember(fact: str) -> str:
        """Save a fact to long-term memory so it is available in later conversations and threads."""
        with memory_errors_as_tool_errors():
            item = store.remember(user, fact)
        return f"{'already remembered' if item.existing else 'remembered'}: {item.text}"

    def recall(query: str, limit: int = 5) -> str:
        """Search long-term memory for facts saved in earlier conversations."""
        if not clean_text(query):
            raise ToolInputError(
                "the query is empty; give words to look for, e.g. 'favourite colour'"
            )
        with memory_errors_as_tool_errors():
            items = store.recall(user, query, limit)
        return format_recall(query, items)

    return [
        StructuredTool.from_function(remember, args_schema=RememberArgs),
        StructuredTool.from_function(recall, args_schema=RecallArgs),
    ]
