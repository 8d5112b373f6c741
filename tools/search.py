"""web_search: a SQLite FTS5 index of the user's documents (default) or an opt-in web backend.

The index lives in `corpus_*` tables of the database it is given (Waypoint passes its checkpoint file).
"""

from __future__ import annotations

import codecs
import datetime
import hashlib
import importlib
import itertools
import os
import re
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal, Protocol

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from tools.errors import ToolError, ToolInputError, ToolNotFoundError

BACKENDS = ("local", "ddgs", "tavily")
DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024
DEFAULT_CHUNK_CHARS = 1500
SUFFIXES = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".html": "html",
    ".htm": "html",
}
MAX_QUERY_CHARS = 2000
MAX_QUERY_TERMS = 32
SNIPPET_TOKENS = 24
HIGHLIGHT = "**"
# Title hits count more than body hits; the hidden `grams` column counts like the body.
_BM25 = "bm25(corpus_fts, 3.0, 1.0, 1.0)"
# Private-use marks that cannot occur in indexed text, so a highlight is detectable.
_OPEN, _CLOSE = "\ue000", "\ue001"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS corpus_documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS corpus_chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS corpus_chunks_doc ON corpus_chunks(doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS corpus_fts USING fts5(
    title, body, grams, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""

# Scripts written without spaces between words. unicode61 turns a whole run of them into one
# token, so such runs are also indexed as overlapping bigrams in the hidden `grams` column.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_{_CJK}]+")
_WORD_AT_END = re.compile(rf"[^\W_{_CJK}]+\Z")
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a about an and are as at be but by can could did do does for from had has have he her his "
        "how i if in into is it its me my no not of on or our she should so than that the their "
        "them then there these they this to us was we were what when where which who why will "
        "with would you your",
    )
)


@dataclass(frozen=True)
class SearchResult:
    """One hit. `score` is higher for better hits and comparable only within one search."""

    title: str
    snippet: str
    source: str
    score: float


class SearchBackend(Protocol):
    """Anything web_search can ask: the local corpus or a web search service."""

    def search(self, query: str, max_results: int) -> list[SearchResult]: ...


class EmptyCorpusError(ToolNotFoundError):
    """Raised when the local corpus is searched while it holds no document."""


class UnknownDocumentError(ToolNotFoundError):
    """Raised by LocalIndex.remove for an id or path that is not in the corpus."""


class CorpusDatabaseError(ToolError):
    """Raised when the database holding the corpus cannot be opened, read or written."""


class SearchUnavailableError(ToolError):
    """Raised when an online backend cannot be used: package missing, no API key, network down."""


@dataclass(frozen=True)
class DocumentInfo:
    """A document in the corpus, as `corpus list` shows it."""

    id: int
    path: str
    title: str
    chunks: int
    bytes: int
    added_at: str


@dataclass(frozen=True)
class FileOutcome:
    """What `add` did with one file; `detail` is the skip reason or a note (chunks, decoding)."""

    path: str
    status: Literal["added", "updated", "unchanged", "skipped"]
    detail: str = ""


@dataclass(frozen=True)
class AddReport:
    """The outcome of one `add` call, file by file, in the order the files were found."""

    files: tuple[FileOutcome, ...]

    def with_status(self, status: str) -> list[FileOutcome]:
        return [f for f in self.files if f.status == status]

    @property
    def added(self) -> list[FileOutcome]:
        return self.with_status("added")

    @property
    def updated(self) -> list[FileOutcome]:
        return self.with_status("updated")

    @property
    def unchanged(self) -> list[FileOutcome]:
        return self.with_status("unchanged")

    @property
    def skipped(self) -> list[FileOutcome]:
        return self.with_status("skipped")


# --------------------------------------------------------------------------- documents → text


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    text: str
    replaced_bytes: bool


class _HtmlText(HTMLParser):
    """Visible text of an HTML page: paragraphs at block boundaries, script/style dropped."""

    _SKIP = frozenset({"script", "style", "noscript", "template"})
    _HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
    _BLOCKS = _HEADINGS | frozenset(
        re.findall(
            r"\w+",
            "p div br li ul ol tr table section article header footer nav aside main pre "
            "blockquote dt dd hr figure figcaption",
        )
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self.heading = ""
        self._skip_depth = 0
        self._in_title = False
        self._heading_parts: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip_depth += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self._HEADINGS and not self.heading:
            self._heading_parts = []
        if tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in self._HEADINGS and self._heading_parts is not None:
            self.heading = _one_line("".join(self._heading_parts))
            self._heading_parts = None
        if tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        if self._in_title:
            self.title += data
            return
        if self._heading_parts is not None:
            self._heading_parts.append(data)
        self.parts.append(re.sub(r"\s+", " ", data))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(text: str) -> str:
    """Strip each line and keep at most one blank line between paragraphs."""
    lines = [line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _decode(raw: bytes, kind: str) -> tuple[str, bool]:
    """UTF-8 (BOM allowed), else an HTML page's declared charset, else UTF-8 with replacement."""
    try:
        return raw.decode("utf-8-sig"), False
    except UnicodeDecodeError:
        pass
    if kind == "html":
        declared = re.search(rb"""charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", raw[:4096], re.I)
        if declared:
            try:
                return raw.decode(codecs.lookup(declared.group(1).decode("ascii")).name), False
            except (LookupError, UnicodeDecodeError):
                pass
    return raw.decode("utf-8", errors="replace"), True


def _markdown_title(text: str) -> str:
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        for end in range(1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                for line in lines[1:end]:
                    found = re.match(r"title:\s*(.+)", line)
                    if found:
                        return found.group(1).strip().strip("'\"")
                start = end + 1
                break
    for i in range(start, len(lines)):
        atx = re.match(r" {0,3}#{1,6}\s+(.+?)\s*#*\s*$", lines[i])
        if atx:
            return atx.group(1)
        underline = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if lines[i].strip() and re.fullmatch(r"=+|-+", underline):
            return lines[i].strip()
    return ""


def _rst_title(text: str) -> str:
    for line, under in itertools.pairwise(text.split("\n")):
        title, under = line.strip(), under.strip()
        adornment = re.fullmatch(r"([=\-`:'\"~^_*+#<>])\1*", under)
        if title and adornment and len(under) >= len(title) and not re.fullmatch(r"(\W)\1*", title):
            return title
    return ""


def parse_document(name: str, raw: bytes) -> ParsedDocument:
    """Title and plain text of a supported file; the title falls back to the file name."""
    kind = SUFFIXES[Path(name).suffix.lower()]
    text, replaced = _decode(raw, kind)
    title = ""
    if kind == "html":
        parser = _HtmlText()
        parser.feed(text)
        parser.close()
        title = _one_line(parser.title) or parser.heading
        text = "".join(parser.parts)
    elif kind == "markdown":
        title = _markdown_title(text)
    elif kind == "rst":
        title = _rst_title(text)
    return ParsedDocument(
        title=(_one_line(title) or name)[:200], text=_paragraphs(text), replaced_bytes=replaced
    )


def split_chunks(text: str, target: int = DEFAULT_CHUNK_CHARS) -> list[str]:
    """Pack paragraphs into chunks of at most `target` characters; longer paragraphs are cut at a
    sentence end or a space when there is one in the second half of the window."""
    chunks: list[str] = []
    current = ""
    for paragraph in text.split("\n\n"):
        for piece in _cut(paragraph.strip(), target):
            if current and len(current) + 2 + len(piece) > target:
                chunks.append(current)
                current = piece
            else:
                current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def _cut(paragraph: str, target: int) -> Iterator[str]:
    while len(paragraph) > target:
        window = paragraph[:target]
        ends = [m.end() for m in re.finditer(r"[.!?。！？](?=\s|$)|[。！？]", window)]
        spaces = [m.start() for m in re.finditer(r"\s", window)]
        cut = next((at for at in (*reversed(ends), *reversed(spaces)) if at > target // 2), target)
        yield paragraph[:cut].strip()
        paragraph = paragraph[cut:].strip()
    if paragraph:
        yield paragraph


def index_grams(text: str) -> str:
    """The hidden `grams` column: every run of CJK characters as overlapping bigrams plus its last
    character (so one-character prefix queries find any character), and Latin words glued to a
    run ("GPT模型") which unicode61 would otherwise fold into one token with the CJK text."""
    out: list[str] = []
    last_glued = -1
    for run in _CJK_RUN.finditer(text):
        chars = run.group()
        out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        out.append(chars[-1])
        before = _WORD_AT_END.search(text, max(0, run.start() - 64), run.start())
        if before and before.start() != last_glued:
            out.append(before.group())
        after = _WORD.match(text, run.end())
        if after:
            out.append(after.group())
            last_glued = after.start()
    return " ".join(out)


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class QueryPlan:
    """Two FTS5 expressions built only from quoted tokens: every term (`strict`), then any term
    (`loose`, stopwords dropped, CJK runs as single bigrams); `needles` are the CJK runs and words,
    for highlighting what snippet() cannot mark."""

    strict: str
    loose: str
    needles: tuple[str, ...]


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def _cjk_term(run: str) -> str:
    if len(run) == 1:
        return f'grams : "{run}"*'
    return 'grams : "' + " ".join(_bigrams(run)) + '"'


def plan_query(query: str) -> QueryPlan | None:
    """Turn free text into safe FTS5 syntax; None when it holds no searchable word.

    User and model text is never passed through: only runs of letters and digits survive, each
    inside double quotes, so quotes, parentheses, `*`, `-`, `:`, AND/OR/NOT/NEAR are inert.
    """
    strict: list[str] = []
    loose: list[str] = []
    needles: list[str] = []
    for chunk in query[:MAX_QUERY_CHARS].split():
        words = _WORD.findall(chunk)
        if words and not (len(words) == 1 and words[0].casefold() in _STOPWORDS):
            strict.append('"' + " ".join(words) + '"')
        loose.extend(f'"{w}"' for w in words if w.casefold() not in _STOPWORDS)
        needles.extend(w for w in words if w.casefold() not in _STOPWORDS)
        for run in _CJK_RUN.findall(chunk):
            strict.append(_cjk_term(run))
            loose.extend(_cjk_term(gram) for gram in _bigrams(run))
            needles.append(run)
    if not strict:  # only stopwords: search for them after all
        strict = loose = [f'"{w}"' for w in _WORD.findall(query[:MAX_QUERY_CHARS])]
        if not strict:
            return None
    strict = list(dict.fromkeys(strict))[:MAX_QUERY_TERMS]
    loose = list(dict.fromkeys(loose or strict))[:MAX_QUERY_TERMS]
    return QueryPlan(" AND ".join(strict), " OR ".join(loose), tuple(needles))


def _highlight_window(body: str, needles: Iterable[str]) -> str | None:
    """A snippet around the longest needle found, for matches snippet() cannot mark: CJK text and
    words glued to it, which match only in the hidden `grams` column."""
    cjk = [gram for needle in needles if _CJK_RUN.match(needle) for gram in _bigrams(needle)]
    for needle in sorted({*needles, *cjk}, key=len, reverse=True):
        found = re.search(re.escape(needle), body, re.IGNORECASE)
        if found:
            at, stop = found.span()
            start, end = max(0, at - 50), min(len(body), stop + 100)
            return (
                ("…" if start else "")
                + f"{body[start:at]}{HIGHLIGHT}{body[at:stop]}{HIGHLIGHT}{body[stop:end]}"
                + ("…" if end < len(body) else "")
            )
    return None


# --------------------------------------------------------------------------- the local index


class LocalIndex:
    """The user's documents in SQLite FTS5 tables (`corpus_*`) of `db_path`, ranked with BM25.

    Every call opens its own short-lived connection (WAL, busy timeout), so one index can be used
    from the tool threads and beside the checkpointer's connection.
    """

    def __init__(
        self,
        db_path: Path,
        *,
        busy_timeout: float = 5.0,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
    ) -> None:
        self.db_path = Path(db_path)
        self.busy_timeout = busy_timeout
        self.max_file_bytes = max_file_bytes
        self.chunk_chars = chunk_chars

    def add(self, paths: Iterable[Path | str]) -> AddReport:
        """Index files and the supported files below directories; a changed file is replaced."""
        outcomes: list[FileOutcome] = []
        seen: set[str] = set()
        with self._database() as conn:
            conn.executescript(_SCHEMA)
            for path, problem in _walk(paths):
                if problem:
                    outcomes.append(FileOutcome(str(path), "skipped", problem))
                elif str(path) not in seen:
                    seen.add(str(path))
                    outcomes.append(self._add_file(conn, path))
        return AddReport(tuple(outcomes))

    def list(self) -> list[DocumentInfo]:
        """Every document, by path."""
        if not self.db_path.exists():
            return []
        with self._database() as conn:
            if not _has_schema(conn):
                return []
            rows = conn.execute(
                "SELECT id, path, title, chunks, bytes, added_at FROM corpus_documents ORDER BY path"
            ).fetchall()
        return [DocumentInfo(*row) for row in rows]

    def remove(self, path_or_id: str | int) -> int:
        """Remove a document by id or path, or every document below a directory; returns the count."""
        key = str(path_or_id).strip()
        if not key:
            raise UnknownDocumentError("no document id or path given; see `corpus list`")
        if not self.db_path.exists():
            raise _unknown_document(key)
        with self._database() as conn:
            if not _has_schema(conn):
                raise _unknown_document(key)
            ids = _ids_for(conn, key)
            if not ids:
                raise _unknown_document(key)
            with _transaction(conn):
                for doc_id in ids:
                    _delete_document(conn, doc_id)
        return len(ids)

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        """The best chunk of each of the `max_results` best documents: documents holding every
        term first, then documents holding some of them."""
        if not query.strip():
            raise ToolInputError("the query is empty; give a few words to search for")
        if max_results < 1:
            raise ToolInputError("max_results must be at least 1")
        if not self.db_path.exists():
            raise _empty_corpus()
        with self._database() as conn:
            if (
                not _has_schema(conn)
                or not conn.execute("SELECT 1 FROM corpus_documents LIMIT 1").fetchone()
            ):
                raise _empty_corpus()
            plan = plan_query(query)
            if plan is None:
                return []
            hits: dict[int, tuple[int, float, str]] = {}
            for expression in dict.fromkeys((plan.strict, plan.loose)):
                _collect_hits(conn, expression, hits, max_results)
            return [
                self._result(conn, doc_id, chunk_id, rank, expression, plan.needles)
                for doc_id, (chunk_id, rank, expression) in hits.items()
            ]

    def _result(
        self,
        conn: sqlite3.Connection,
        doc_id: int,
        chunk_id: int,
        rank: float,
        expression: str,
        needles: tuple[str, ...],
    ) -> SearchResult:
        path, title = conn.execute(
            "SELECT path, title FROM corpus_documents WHERE id = ?", (doc_id,)
        ).fetchone()
        snippet, body = conn.execute(
            "SELECT snippet(corpus_fts, 1, ?, ?, '…', ?), body FROM corpus_fts "
            "WHERE corpus_fts MATCH ? AND rowid = ?",
            (_OPEN, _CLOSE, SNIPPET_TOKENS, expression, chunk_id),
        ).fetchone()
        if _OPEN in snippet:
            snippet = snippet.replace(_OPEN, HIGHLIGHT).replace(_CLOSE, HIGHLIGHT)
        else:
            snippet = _highlight_window(body, needles) or snippet
        return SearchResult(title=title, snippet=_one_line(snippet), source=path, score=-rank)

    def _add_file(self, conn: sqlite3.Connection, path: Path) -> FileOutcome:
        shown = str(path)
        raw, problem = _read(path, self.max_file_bytes)
        if raw is None:
            return FileOutcome(shown, "skipped", problem)
        digest = hashlib.sha256(raw).hexdigest()
        row = conn.execute(
            "SELECT id, sha256 FROM corpus_documents WHERE path = ?", (shown,)
        ).fetchone()
        if row and row[1] == digest:
            return FileOutcome(shown, "unchanged")
        parsed = parse_document(path.name, raw)
        chunks = split_chunks(parsed.text, self.chunk_chars)
        with _transaction(conn):
            row = conn.execute(
                "SELECT id FROM corpus_documents WHERE path = ?", (shown,)
            ).fetchone()
            if row:
                _delete_document(conn, row[0])
            if not chunks:
                earlier = " (its earlier version was removed from the corpus)" if row else ""
                return FileOutcome(shown, "skipped", f"contains no text{earlier}")
            _insert_document(conn, shown, parsed.title, digest, len(raw), chunks)
        notes = [f"{len(chunks)} chunk{'s' if len(chunks) != 1 else ''}"]
        if parsed.replaced_bytes:
            notes.append("not valid UTF-8: undecodable bytes were replaced")
        return FileOutcome(shown, "updated" if row else "added", "; ".join(notes))

    @contextmanager
    def _database(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = _connect(self.db_path, self.busy_timeout)
            try:
                yield conn
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise _database_error(self.db_path, exc) from exc


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _database_error(path: Path, exc: sqlite3.DatabaseError) -> CorpusDatabaseError:
    text = str(exc)
    if "no such module: fts5" in text:
        reason = "this Python's SQLite was built without FTS5, which the local corpus needs"
    elif "locked" in text or "busy" in text:
        reason = "it is locked by another process; try again in a moment"
    else:
        reason = text
    return CorpusDatabaseError(
        f"the document index in {path} cannot be used: {reason}; tell the user"
    )


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _has_schema(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('corpus_documents', 'corpus_fts')"
    ).fetchone()
    return row[0] == 2


def _collect_hits(
    conn: sqlite3.Connection,
    expression: str,
    hits: dict[int, tuple[int, float, str]],
    limit: int,
) -> None:
    """Add the best chunk of each not-yet-found document, best first, until `limit` documents."""
    if len(hits) >= limit:
        return
    rows = conn.execute(
        f"SELECT c.doc_id, corpus_fts.rowid, {_BM25} AS bm25_rank FROM corpus_fts "
        "JOIN corpus_chunks c ON c.id = corpus_fts.rowid "
        "WHERE corpus_fts MATCH ? ORDER BY bm25_rank",
        (expression,),
    )
    for doc_id, chunk_id, rank in rows:
        if doc_id not in hits:
            hits[doc_id] = (chunk_id, rank, expression)
            if len(hits) >= limit:
                break


def _insert_document(
    conn: sqlite3.Connection, path: str, title: str, digest: str, size: int, chunks: list[str]
) -> None:
    added_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    doc_id = conn.execute(
        "INSERT INTO corpus_documents (path, title, sha256, bytes, chunks, added_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (path, title, digest, size, len(chunks), added_at),
    ).lastrowid
    title_grams = index_grams(title)
    for seq, text in enumerate(chunks):
        chunk_id = conn.execute(
            "INSERT INTO corpus_chunks (doc_id, seq) VALUES (?, ?)", (doc_id, seq)
        ).lastrowid
        conn.execute(
            "INSERT INTO corpus_fts (rowid, title, body, grams) VALUES (?, ?, ?, ?)",
            (chunk_id, title, text, f"{title_grams} {index_grams(text)}".strip()),
        )


def _delete_document(conn: sqlite3.Connection, doc_id: int) -> None:
    conn.execute(
        "DELETE FROM corpus_fts WHERE rowid IN (SELECT id FROM corpus_chunks WHERE doc_id = ?)",
        (doc_id,),
    )
    conn.execute("DELETE FROM corpus_chunks WHERE doc_id = ?", (doc_id,))
    conn.execute("DELETE FROM corpus_documents WHERE id = ?", (doc_id,))


def _ids_for(conn: sqlite3.Connection, key: str) -> list[int]:
    """A numeric key is an id if such a document exists; otherwise a file or directory path."""
    if key.isdigit():
        row = conn.execute("SELECT id FROM corpus_documents WHERE id = ?", (int(key),)).fetchone()
        if row:
            return [row[0]]
    candidates = {key}
    with suppress(OSError, RuntimeError):
        candidates.add(str(Path(key).expanduser().resolve()))
    ids: list[int] = []
    for path in candidates:
        prefix = path.rstrip("/") + "/"
        ids += [
            row[0]
            for row in conn.execute(
                "SELECT id FROM corpus_documents WHERE path = ? OR substr(path, 1, ?) = ?",
                (path, len(prefix), prefix),
            )
        ]
    return sorted(set(ids))


def _unknown_document(key: str) -> UnknownDocumentError:
    return UnknownDocumentError(
        f"no document with id or path {key!r} in the corpus; see `corpus list` for ids and paths"
    )


def _empty_corpus() -> EmptyCorpusError:
    return EmptyCorpusError(
        "the document corpus is empty, so there is nothing to search; tell the user they can add "
        "documents with `python -m app corpus add PATH`"
    )


def _walk(paths: Iterable[Path | str]) -> Iterator[tuple[Path, str]]:
    """(resolved file, "") for each candidate file, or (path, reason) for one that cannot be used.
    Inside directories, hidden entries are passed over and directory symlinks are not followed."""
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            problems: list[OSError] = []
            for top, dirs, files in os.walk(path, onerror=problems.append):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if not name.startswith("."):
                        yield _candidate(Path(top) / name)
            for problem in problems:
                yield Path(problem.filename or path), f"cannot read: {problem.strerror}"
        elif path.exists():
            yield _candidate(path)
        else:
            yield path, "does not exist"


def _candidate(path: Path) -> tuple[Path, str]:
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        return path, f"cannot resolve the path ({exc})"
    suffix = resolved.suffix.lower()
    if suffix not in SUFFIXES:
        kinds = ", ".join(sorted(SUFFIXES))
        return resolved, f"unsupported file type {suffix or '(no extension)'!r}; supported: {kinds}"
    return resolved, ""


def _read(path: Path, limit: int) -> tuple[bytes | None, str]:
    """The file's bytes, or None and the reason it is skipped (not a regular file, too big, binary)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > limit:
            return None, f"{st.st_size:,} bytes is over the {limit:,}-byte limit per file"
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if len(raw) > limit:  # grew after stat
        return None, f"over the {limit:,}-byte limit per file"
    if b"\x00" in raw[:8192]:
        return None, "looks like a binary file (contains NUL bytes)"
    return raw, ""


# --------------------------------------------------------------------------- web backends

_HTTP_PACKAGES = frozenset({"httpx", "httpcore", "requests", "urllib3", "primp", "aiohttp"})


def _import_client(module: str, attribute: str, extra: str, backend: str) -> Any:
    try:
        return getattr(importlib.import_module(module), attribute)
    except ImportError:
        raise SearchUnavailableError(
            f"the {backend} web search backend needs the '{module}' package, which is not "
            f"installed; tell the user to run: pip install 'waypoint[{extra}]' "
            "(or to use the local corpus)"
        ) from None


def _network_error(backend: str, exc: Exception, package: str) -> SearchUnavailableError | None:
    """The ToolError for a failure of the service or the network, or None for anything else (a bug)."""
    kind = type(exc)
    root = kind.__module__.partition(".")[0]
    if isinstance(exc, TimeoutError) or "timeout" in kind.__name__.lower():
        return SearchUnavailableError(
            f"the {backend} web search timed out; the network may be slow or unreachable; try "
            "again later, search the local corpus, or answer from what you already know"
        )
    if isinstance(exc, OSError) or root in _HTTP_PACKAGES or root == package:
        return SearchUnavailableError(
            f"the {backend} web search failed ({kind.__name__}: {exc}); the network may be "
            "unreachable; try again later, search the local corpus, or answer from what you "
            "already know"
        )
    return None


class DdgsBackend:
    """DuckDuckGo and friends through the optional `ddgs` package (no API key)."""

    def __init__(
        self, *, timeout: int = 10, client_factory: Callable[[], Any] | None = None
    ) -> None:
        self.timeout = timeout
        self._client_factory = client_factory

    def search(self, query: str, max_results: int) -> list[SearchResult]:
        if not query.strip():
            raise ToolInputError("the query is empty; give a few words to search for")
        if self._client_factory is None:
            ddgs_class = _import_client("ddgs", "DDGS", "search-ddgs", "ddgs")
            client = ddgs_class(timeout=self.timeout)
        else:
            client = self._client_factory()
        try:
            rows = list(client.text(query, max_results=max_results))
        except Exception as exc:
            error = _network_error("ddgs", exc, "ddgs")
            if error is None:
                raise
            raise error from exc
        count = min(len(rows), max_results)
        return [
            SearchResult(
                title=_one_line(str(row.get("title") or row.get("href") or "untitled")),
                snippet=_one_line(str(row.get("body") or "")),
                source=str(row.get("href") or ""),
                score=float(count - i),
            )
            for i, row in enumerate(rows[:max_results])
        ]


class TavilyBackend:
    """Tavily's search API through the optional `tavily-python` package; needs TAVILY_API_KEY."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        client_factory: Callable[[str], Any] | None = None,
    ) -> None:
        self._api_key = api_key
        self._client_factory = client_factory

    def search(self, query: str, max_results: int) -> list[SearchResult]:
        if not query.strip():
            raise ToolInputError("the query is empty; give a few words to search for")
        factory = self._client_factory or _import_client(
            "tavily", "TavilyClient", "search-tavily", "tavily"
        )
        key = self._api_key or os.environ.get("TAVILY_API_KEY", "")
        if not key:
            raise SearchUnavailableError(
                "the tavily web search backend needs an API key and TAVILY_API_KEY is not set; "
                "tell the user to set it (or to use the local corpus)"
            )
        try:
            response = factory(key).search(query, max_results=max_results)
        except Exception as exc:
            if type(exc).__name__ in ("InvalidAPIKeyError", "MissingAPIKeyError"):
                raise SearchUnavailableError(
                    "tavily rejected the API key in TAVILY_API_KEY; tell the user to check it"
                ) from exc
            error = _network_error("tavily", exc, "tavily")
            if error is None:
                raise
            raise error from exc
        return [
            SearchResult(
                title=_one_line(str(row.get("title") or row.get("url") or "untitled")),
                snippet=_one_line(str(row.get("content") or "")),
                source=str(row.get("url") or ""),
                score=float(row.get("score") or 0.0),
            )
            for row in list(response.get("results") or [])[:max_results]
        ]


def make_backend(name: str, db_path: Path) -> SearchBackend:
    """The backend called `name`: "local" (the corpus in `db_path`), "ddgs" or "tavily"."""
    key = (name or "local").strip().lower()
    if key == "local":
        return LocalIndex(db_path)
    if key == "ddgs":
        return DdgsBackend()
    if key == "tavily":
        return TavilyBackend()
    raise ValueError(f"unknown search backend {name!r}; use one of: {', '.join(BACKENDS)}")


# --------------------------------------------------------------------------- the tool


def format_results(results: Iterable[SearchResult]) -> str:
    """'1. Title — source' and the snippet indented below it, one entry per result."""
    lines: list[str] = []
    for number, result in enumerate(results, 1):
        lines.append(f"{number}. {_one_line(result.title)} — {result.source}")
        if result.snippet:
            lines.append(f"   {_one_line(result.snippet)}")
    return "\n".join(lines)


def no_match_message(query: str) -> str:
    shown = _one_line(query)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return (
        f"nothing matched {shown!r}; try other words: synonyms, fewer or more general terms, "
        "or just the most distinctive word"
    )


class WebSearchArgs(BaseModel):
    """Arguments of web_search."""

    query: str = Field(
        min_length=1,
        description="A few distinctive words to look for, e.g. 'solar panel efficiency'.",
    )
    max_results: int = Field(default=5, ge=1, le=20, description="How many results (1-20).")


def make_search_tool(backend: SearchBackend) -> BaseTool:
    """Build the web_search tool on `backend`."""

    def web_search(query: str, max_results: int = 5) -> str:
        """Search the local document corpus (or the configured web backend) and return titles, snippets and sources."""
        results = backend.search(query, max_results)
        return format_results(results) if results else no_match_message(query)

    return StructuredTool.from_function(web_search, args_schema=WebSearchArgs)
