"""The last few turns of a thread, compactly: what the REPL shows when it opens or switches to a
thread that already has a conversation (each request, the tools it used, the start of the answer)."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from rich.console import Console
from rich.table import Table
from rich.text import Text

from app.errors import printable
from app.text import plural

RECENT_TURNS = 3
ANSWER_LINES = 4  # lines of each answer shown; the rest is counted


def print_recap(
    console: Console, messages: Sequence[AnyMessage], turns: int = RECENT_TURNS
) -> None:
    groups = _turns(messages)
    shown = groups[-turns:]
    hidden = len(groups) - len(shown)
    if hidden:
        console.print(
            Text(f"… {plural(hidden, 'earlier turn')} not shown (/history lists them)", style="dim")
        )
    for group in shown:
        _print_turn(console, group)


def _turns(messages: Sequence[AnyMessage]) -> list[list[AnyMessage]]:
    groups: list[list[AnyMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            groups.append([message])
        elif groups:
            groups[-1].append(message)
    return groups


def _print_turn(console: Console, turn: list[AnyMessage]) -> None:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    grid.add_row(Text("you", style="bold green"), Text(printable(turn[0].text, keep="\n")))
    results = [m for m in turn if isinstance(m, ToolMessage)]
    if results:
        tools = Text()
        for index, result in enumerate(results):
            ok = result.status != "error"
            tools.append(" · " if index else "", style="dim")
            tools.append("✓ " if ok else "✗ ", style="green" if ok else "red")
            tools.append(result.name or "tool", style="dim")
        grid.add_row("", tools)
    answer = next(
        (m for m in reversed(turn) if isinstance(m, AIMessage) and not m.tool_calls and m.text),
        None,
    )
    if answer is not None:
        lines = printable(answer.text.strip(), keep="\n").splitlines()
        text = "\n".join(lines[:ANSWER_LINES])
        if len(lines) > ANSWER_LINES:
            text += f"\n… {plural(len(lines) - ANSWER_LINES, 'more line')}"
        grid.add_row(Text("agent", style="bold cyan"), Text(text))
    console.print(grid, soft_wrap=False)
