"""The last few turns of a thread, compactly: what the REPL shows when it opens or switches to a
thread that already has a conversation (each request, the tools it used, the start of the answer).

The recap is made from messages of either form: built LangChain messages (a loaded state), or the
messages stored in a checkpoint read as data (app/db/raw.py), which is how the REPL shows it before
LangChain has loaded (app/cli/repl_start.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from app.text import plural, shown

RECENT_TURNS = 3
ANSWER_LINES = 4  # lines of each answer shown; the rest is counted


@dataclass
class RecapTurn:
    """One turn as the recap shows it: the request, each tool result (name, succeeded), the answer."""

    request: str
    tools: list[tuple[str, bool]] = field(default_factory=list)
    answer: str = ""


@dataclass(frozen=True)
class Said:
    """What the recap needs of one message, of either form."""

    kind: str  # human, ai, tool, system, …
    content: Any
    name: str = ""
    failed: bool = False
    calls_tools: bool = False

    @property
    def text(self) -> str:
        """The message's text, as LangChain's `BaseMessage.text` reads it."""
        if isinstance(self.content, str):
            return self.content
        if not isinstance(self.content, list):
            return ""
        return "".join(
            block if isinstance(block, str) else block["text"]
            for block in self.content
            if isinstance(block, str)
            or (
                isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            )
        )


CHUNK_KINDS = {"HumanMessageChunk": "human", "AIMessageChunk": "ai", "ToolMessageChunk": "tool"}


def said(message: Any) -> Said:
    """A built LangChain message."""
    return Said(
        kind=CHUNK_KINDS.get(message.type, message.type),
        content=message.content,
        name=getattr(message, "name", None) or "",
        failed=getattr(message, "status", None) == "error",
        calls_tools=bool(getattr(message, "tool_calls", None)),
    )


def said_stored(message: Any) -> Said:
    """A message stored in a checkpoint, read as data (app/db/raw.Stored)."""
    fields = message.fields
    kind = str(fields.get("type", ""))
    return Said(
        kind=CHUNK_KINDS.get(kind, kind),
        content=fields.get("content"),
        name=fields.get("name") or "",
        failed=fields.get("status") == "error",
        calls_tools=bool(fields.get("tool_calls")),
    )


def recap_turns(messages: Sequence[Said]) -> list[RecapTurn]:
    turns: list[RecapTurn] = []
    for message in messages:
        if message.kind == "human":
            turns.append(RecapTurn(message.text))
        elif not turns:
            continue
        elif message.kind == "tool":
            turns[-1].tools.append((message.name or "tool", not message.failed))
        elif message.kind == "ai" and not message.calls_tools and message.text:
            turns[-1].answer = message.text
    return turns


def print_recap(
    console: Console,
    turns: Sequence[RecapTurn],
    shown: int = RECENT_TURNS,
    total: int | None = None,
) -> None:
    """The last `shown` turns, after a line counting the others: of `total`, the thread's turn
    count, when given (after a summary, the messages hold only the turns it did not replace)."""
    recent = turns[-shown:]
    hidden = max(len(turns), total or 0) - len(recent)
    if hidden:
        console.print(
            Text(f"… {plural(hidden, 'earlier turn')} not shown (/history lists them)", style="dim")
        )
    for turn in recent:
        _print_turn(console, turn)


def _print_turn(console: Console, turn: RecapTurn) -> None:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    grid.add_row(Text("you", style="bold green"), Text(shown(turn.request)))
    if turn.tools:
        tools = Text()
        for index, (name, ok) in enumerate(turn.tools):
            tools.append(" · " if index else "", style="dim")
            tools.append("✓ " if ok else "✗ ", style="green" if ok else "red")
            tools.append(name, style="dim")
        grid.add_row("", tools)
    if turn.answer:
        lines = shown(turn.answer.strip()).splitlines()
        text = "\n".join(lines[:ANSWER_LINES])
        if len(lines) > ANSWER_LINES:
            text += f"\n… {plural(len(lines) - ANSWER_LINES, 'more line')}"
        grid.add_row(Text("agent", style="bold cyan"), Text(text))
    console.print(grid, soft_wrap=False)
