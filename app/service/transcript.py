"""Markdown transcripts of a conversation: each turn's request, tool calls with results, answers."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from app.text import plural, shown
from graphs.shared.tool_calls import for_user


def render_markdown(
    thread_id: str, messages: Sequence[AnyMessage], summarised: Collection[str | None] = ()
) -> str:
    """Markdown for a message list; a tool result is shown under its call, marked ✗ on error, in
    the user's wording. Turns whose request is in `summarised` are marked: a summary stands for
    them in the model's context. Control characters are escaped (`shown`): the Markdown is read
    in a terminal as often as in a viewer, and an ESC in a message must not reach either."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    listed: set[str] = set()
    turns = sum(isinstance(m, HumanMessage) for m in messages)
    lines = [f"# Waypoint thread {_code(thread_id)}", "", f"{plural(turns, 'turn')}."]
    turn = 0
    for message in messages:
        if isinstance(message, HumanMessage):
            turn += 1
            lines += ["", f"## Turn {turn}"]
            if message.id in summarised:
                lines += ["", "_Summarised in the model's context; shown here in full._"]
            lines += ["", "**User**", "", _quote(message.text)]
        elif isinstance(message, AIMessage):
            for call in message.tool_calls:
                lines += _tool_lines(call["name"], call["args"], results.get(call["id"] or ""))
                listed.add(call["id"] or "")
            for bad in message.invalid_tool_calls:
                lines += ["", f"**Tool call** {_code(bad.get('name') or '?')} ✗ invalid arguments"]
                lines += ["", _fenced(bad.get("args") or "")]
            if message.text.strip():
                lines += ["", "**Assistant**", "", _line_breaks(message.text.strip())]
        elif isinstance(message, ToolMessage) and message.tool_call_id not in listed:
            lines += _tool_lines(message.name or "tool", None, message)
        elif not isinstance(message, ToolMessage):
            lines += ["", f"**{message.type.capitalize()}**", "", _quote(message.text)]
    return shown("\n".join(lines) + "\n")


def _tool_lines(name: str, args: Any, result: ToolMessage | None) -> list[str]:
    failed = result is not None and result.status == "error"
    head = f"**Tool call** {_code(name)}"
    if args is not None:
        head += f" {_code(json.dumps(args, ensure_ascii=False, sort_keys=True))}"
    lines = ["", head + (" ✗" if failed else "")]
    if result is None:
        return [*lines, "", "_no result_"]
    label = "Result ✗ (error)" if failed else "Result"
    return [*lines, "", f"{label}:", "", _fenced(for_user(result))]  # not the model's advice


def _code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    ticks = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fenced(text: str) -> str:
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    return f"{fence}text\n{text}\n{fence}"


def _quote(text: str) -> str:
    return _line_breaks(
        "\n".join(f"> {line}" if line else ">" for line in text.splitlines() or [""])
    )


FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def _line_breaks(text: str) -> str:
    """Markdown joins consecutive lines into one paragraph; a message's own line breaks are kept
    as hard breaks (two trailing spaces), except inside fenced code, which keeps them anyway."""
    lines = text.split("\n")
    fenced = False
    for index, line in enumerate(lines[:-1]):
        if FENCE.match(line.lstrip("> ")):
            fenced = not fenced
        following = lines[index + 1].strip(" >")
        if not fenced and line.strip(" >") and following and not FENCE.match(following):
            lines[index] = line + "  "
    return "\n".join(lines)


def _longest_run(text: str, char: str) -> int:
    longest = current = 0
    for c in text:
        current = current + 1 if c == char else 0
        longest = max(longest, current)
    return longest
