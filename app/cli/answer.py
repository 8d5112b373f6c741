"""An answer on the terminal: streamed token by token, wrapped between words at the terminal's width
(CJK counted by display width), with the Markdown blocks a model writes — code fences, tables,
headings — shown as rich renders them once each block is complete."""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import Console
from rich.markdown import Markdown

from app.text import shown

# A line that starts a Markdown block rendered whole: a fence, a table row, a heading.
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
BLOCK_START = re.compile(r"^ {0,3}(`{3,}|~{3,}|\||#{1,6} )")
# Marks that, anywhere in an answer, make it Markdown worth rendering rather than text.
MARKDOWN = re.compile(
    r"(^ {0,3}(`{3,}|~{3,}|#{1,6} |\|.*\|\s*$|[-*+] |\d+[.)] |> ))|\*\*\S|`[^`\n]+`|\[[^\]\n]+\]\(",
    re.MULTILINE,
)
# Code in the terminal's own palette, on its own background (rich's default paints monokai's).
CODE_THEME = "ansi_dark"
# How many characters of a line are enough to know whether it starts a block.
DECIDING_CHARS = 8


def looks_like_markdown(text: str) -> bool:
    return MARKDOWN.search(text) is not None


def print_answer(console: Console, text: str) -> None:
    """A whole answer: rendered as Markdown on a terminal when it is written in Markdown, else as
    text (wrapped between words when the console wraps; piped, exactly as written)."""
    text = shown(text)
    if console.is_terminal and looks_like_markdown(text):
        console.print(Markdown(text, code_theme=CODE_THEME), soft_wrap=False)
    else:
        console.print(text, markup=False, highlight=False, emoji=False)


class WordWrapper:
    """Writes text that arrives in pieces, breaking lines between words at `width` cells: a word is
    held until the space after it arrives (or `flush`), so it is never cut by a line break. A word
    wider than the line is folded; each wide (CJK) character can start a line by itself."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.column = 0
        self._word = ""
        self._gap = ""  # the spaces and tabs before the word held, dropped where a line breaks

    @property
    def width(self) -> int:
        return max(self.console.width, 10)

    def feed(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self.flush()
                self._gap = ""
                self._write("\n")
                self.column = 0
            elif char in " \t":
                self.flush()
                self._gap += char
            elif cell_len(char) > 1:  # CJK: a line may break before any wide character
                self.flush()
                self._word = char
                self.flush()
            else:
                self._word += char

    def flush(self) -> None:
        """Write the word held back (at the end of the answer, or before a block)."""
        if not self._word:
            return
        word, self._word = self._word, ""
        size, gap = cell_len(word), self._gap_width()
        if self.column and self.column + gap + size > self.width:
            self._write("\n")
            self.column = 0
        else:  # at a line's start, the gap is the line's own indentation
            self._write(self._gap)
            self.column += gap
        self._gap = ""
        for char in word if size > self.width - self.column else [word]:
            if self.column and self.column + cell_len(char) > self.width:
                self._write("\n")
                self.column = 0
            self._write(char)
            self.column += cell_len(char)

    def _gap_width(self) -> int:
        column = self.column
        for char in self._gap:  # a tab reaches the next multiple of 8, as a terminal's does
            column += 1 if char == " " else 8 - column % 8
        return column - self.column

    def _write(self, text: str) -> None:
        self.console.file.write(text)


class StreamedAnswer:
    """One answer streamed onto a terminal. Prose is written as it comes, wrapped between words; a
    line that opens a fence, a table or a heading is held, with the rest of its block, and printed
    as rich's Markdown when the block ends (a table can only be laid out once it is whole)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.prose = WordWrapper(console)
        self._line = ""  # the start of the current line, until it shows whether it opens a block
        self._deciding = True
        self._block: list[str] = []  # the lines of the block being held
        self._fence = ""

    def feed(self, text: str) -> None:
        for char in shown(text):
            self._char(char)
        self.console.file.flush()

    def close(self) -> None:
        """The answer ended: print what is held, and end its last line."""
        if self._block or (self._line and BLOCK_START.match(self._line)):
            self._block.append(self._line)
            self._render_block()
        elif self._line:
            self.prose.feed(self._line)
        self._line, self._deciding = "", True
        self.prose.flush()
        if self.prose.column:
            self.prose.feed("\n")
        self.console.file.flush()

    def _char(self, char: str) -> None:
        if self._block or self._deciding:
            self._held(char)
        else:
            self.prose.feed(char)
            if char == "\n":
                self._deciding = True

    def _held(self, char: str) -> None:
        if char != "\n":
            self._line += char
            if not self._block and self._decided_prose():
                self._line, held = "", self._line
                self._deciding = False
                self.prose.feed(held)
            return
        line, self._line = self._line, ""
        if self._block:
            self._block_line(line)
        elif BLOCK_START.match(line):
            self._open_block(line)
        else:
            self.prose.feed(line + "\n")

    def _decided_prose(self) -> bool:
        stripped = self._line.lstrip(" ")
        if not stripped or len(self._line) - len(stripped) > 3:
            return len(self._line) > 3
        if stripped[0] in "`~#":
            return len(stripped) >= DECIDING_CHARS and not BLOCK_START.match(self._line)
        return stripped[0] != "|"

    def _open_block(self, line: str) -> None:
        self.prose.flush()
        if self.prose.column:
            self.prose.feed("\n")
        fence = FENCE.match(line)
        self._fence = fence.group(1)[0] * 3 if fence else ""
        self._block = [line]
        if not fence and line.lstrip().startswith("#"):
            self._render_block()

    def _block_line(self, line: str) -> None:
        if self._fence:
            self._block.append(line)
            if len(self._block) > 1 and line.strip().startswith(self._fence):
                self._render_block()
        elif line.lstrip().startswith("|"):
            self._block.append(line)
        else:  # the table ended: this line is the next one's start
            self._render_block()
            for char in line + "\n":
                self._char(char)

    def _render_block(self) -> None:
        block, self._block, self._fence = "\n".join(self._block), [], ""
        self._deciding = True
        self.console.print(Markdown(block, code_theme=CODE_THEME), soft_wrap=False)
