"""Reading documents for the corpus: finding and reading files, their title and plain text
(HTML, Markdown, reStructuredText, plain text), and chunks of that text to index."""

from __future__ import annotations

import codecs
import itertools
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from tools.search.result import one_line

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
            self.heading = one_line("".join(self._heading_parts))
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
        title = one_line(parser.title) or parser.heading
        text = "".join(parser.parts)
    elif kind == "markdown":
        title = _markdown_title(text)
    elif kind == "rst":
        title = _rst_title(text)
    return ParsedDocument(
        title=(one_line(title) or name)[:200], text=_paragraphs(text), replaced_bytes=replaced
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


def walk_documents(paths: Iterable[Path | str]) -> Iterator[tuple[Path, str]]:
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


def read_document(path: Path, limit: int) -> tuple[bytes | None, str]:
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
