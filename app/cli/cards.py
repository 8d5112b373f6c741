"""One card per tool call: its name, arguments, time and result (or the error as the user should read
it). Results are readable and bounded: a JSON object becomes `key: value` fields, several to a line,
without those that repeat an argument; a long line ends in "…", and past CARD_LINES lines a
"N more lines" line says what was left out."""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.text import Text

from app.service.events import ToolFinished
from app.text import plural, shown, title_shown

CARD_LINES = 8  # result lines shown in a card; the rest is counted


def tool_card(event: ToolFinished, args: dict) -> Panel:
    ok = event.status == "success"
    title = Text.assemble(
        ("✓ " if ok else "✗ ", "green" if ok else "red"),
        (shown(event.tool, one_line=True), "bold"),
        (f"  {event.duration_ms:g} ms", "dim"),
    )
    lines: list[RenderableType] = [_one_line(argument_line(args), "dim")] if args else []
    if ok:
        fields = _new_fields(event.content, args)
        lines += [FieldLines(fields)] if fields else result_lines(event.tool, event.content)
    else:  # the user's wording, whole: an error is short and every word of it matters
        lines.append(Text(shown(event.for_user), style="red"))
    return Panel(
        Group(*lines),
        title=title,
        title_align="left",
        border_style="cyan" if ok else "red",
        expand=False,
    )


def argument_line(args: dict) -> str:
    """The card's title line, `city: Paris · unit: celsius`, as the model meant it (`title_shown`:
    `It&#39;s` as "It's", a line break as ⏎, written out or not)."""
    return " · ".join(f"{key}: {title_shown(_text(value))}" for key, value in args.items())


def fields_line(item: dict) -> str:
    """A result's record on one line, as the tool wrote it: `key: value · key: value`."""
    return " · ".join(f"{key}: {_value(value)}" for key, value in item.items())


def result_lines(tool: str, content: str) -> list[Text]:
    """A result as at most CARD_LINES lines, each cut with "…" at the card's edge."""
    lines = _readable(tool, content)
    shown = [_one_line(line) for line in lines[:CARD_LINES]]
    if len(lines) > CARD_LINES:
        left = len(lines) - CARD_LINES
        shown.append(Text(f"… {plural(left, 'more line')}", style="dim"))
    return shown or [Text("(no output)", style="dim")]


def _readable(tool: str, content: str) -> list[str]:
    if tool == "run_python":
        summary = _python_summary(content)
        if summary is not None:
            return [summary]
    try:
        value = json.loads(content)
    except ValueError:
        return shown(content).splitlines()
    if isinstance(value, dict):
        return [f"{key}: {_value(item)}" for key, item in value.items()]
    if isinstance(value, list):
        return [fields_line(item) if isinstance(item, dict) else _value(item) for item in value]
    return [_value(value)]


def _new_fields(content: str, args: dict) -> list[str] | None:
    """A JSON object's `key: value` fields, less those that only repeat an argument (a forecast's
    city and unit); None when the result is not a JSON object."""
    try:
        value = json.loads(content)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    return [
        f"{key}: {_value(item)}"
        for key, item in value.items()
        if key not in args or _value(args[key]) != _value(item)
    ] or ["(the arguments, confirmed)"]


class FieldLines:
    """`key: value` fields laid out several to a line (" · " between them) at the width the card
    is given: a field is never split across lines; one wider than the card ends in "…"; past
    CARD_LINES lines, a line counts the fields left out."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = _packed(self.fields, options.max_width)
        for line in lines[:CARD_LINES]:
            yield _one_line(" · ".join(line))
        left = sum(len(line) for line in lines[CARD_LINES:])
        if left:
            yield Text(f"… {plural(left, 'more field')}", style="dim")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max(cell_len(field) for field in self.fields)
        whole = cell_len(" · ".join(self.fields))
        return Measurement(min(widest, options.max_width), min(whole, options.max_width))


def _packed(fields: list[str], width: int) -> list[list[str]]:
    lines: list[list[str]] = []
    used = 0
    for field in fields:
        size = cell_len(field)
        if lines and used + 3 + size <= width:
            lines[-1].append(field)
            used += 3 + size
        else:
            lines.append([field])
            used = size
    return lines


def _python_summary(content: str) -> str | None:
    """What a program did, in one line: the output itself belongs to the answer, which shows it
    (a card repeating it would print it twice)."""
    from tools.sandbox import read_result

    run = read_result(content)
    if run is None:
        return None
    parts = [f"exit status {run.status}"]
    if run.limit != "none":
        parts.append(f"limit hit: {run.limit}")
    for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        count = len(text.splitlines())
        parts.append(f"{name}: {plural(count, 'line')}" if count else f"{name} empty")
    return " · ".join(parts)


def _value(value: Any) -> str:
    return shown(_text(value), one_line=True)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _one_line(text: str, style: str = "") -> Text:
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")
