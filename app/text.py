"""Words for the person reading: counts with their noun in the right number, and stored or model
text made safe to print (`shown`, the one function every printer passes such text through)."""

from __future__ import annotations

import html
import re

from app.errors import printable

# A line break or tab a model wrote out as text ("one\\ntwo"), as the title shows it.
WRITTEN_BREAKS = {"\\r\\n": "\n", "\\n": "\n", "\\r": "\n", "\\t": " "}
WRITTEN_BREAK = re.compile("|".join(re.escape(escape) for escape in WRITTEN_BREAKS))
SPACES = re.compile(r"[ \t]{2,}")


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 turn', '3 turns'; `many` for a noun whose plural is not noun + 's' ('1 entry', '2 entries')."""
    return f"{count} {noun}" if count == 1 else f"{count} {many or noun + 's'}"


def shown(text: str, *, one_line: bool = False) -> str:
    """Stored, model or tool text as the terminal shows it: line breaks and tabs kept (with
    `one_line`, a line break becomes "⏎" and a tab a space), every other control character — ESC,
    which starts an escape sequence that can clear the screen, retitle the window or write the
    clipboard; BEL; the C1 controls; a right-to-left override — shown escaped (`\\x1b`)."""
    text = text.replace("\r\n", "\n")
    if one_line:
        text = text.replace("\n", " ⏎ ").replace("\t", " ")
        return printable(text)
    return printable(text, keep="\n\t")


def title_shown(text: str) -> str:
    """Model text (a tool call's argument) as a one-line title: HTML entities decoded (llama-cpp-
    python's chat formats HTML-escape the prompt, and a small model copies `&#39;` from it into its
    arguments), a line break "⏎" whether real or written out as "\\n" by a model that wrote no real
    one, runs of spaces one space. For titles only: the tool received the text as written, which
    `export --format json` and an approval's panel show."""
    text = html.unescape(text)
    if "\n" not in text:
        text = WRITTEN_BREAK.sub(lambda found: WRITTEN_BREAKS[found[0]], text)
    return SPACES.sub(" ", shown(text.strip(), one_line=True))


def json_shown(text: str) -> str:
    """JSON text with every unprintable character inside its strings written as a \\u escape: the
    same JSON to a parser (lossless), nothing a terminal would act on (json.dumps with
    ensure_ascii=False escapes only C0 controls, and lets C1 controls and U+202E through)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else _json_escape(c) for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON spells a character beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
