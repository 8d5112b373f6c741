"""Asking the person at the terminal to approve, edit or reject risky tool calls."""

from __future__ import annotations

import json
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from app.errors import printable

Read = Callable[[str, str], str]  # (question, default) -> answer


def ask_approval(calls: list[dict], read: Read, console: Console) -> dict[str, dict]:
    """One decision per call: approve, reject, or edit its arguments (JSON)."""
    decisions = {}
    for call in calls:
        body = Text()
        body.append("why    ", style="dim")
        body.append(f"it {printable(str(call['reason']))}\n")
        body.append("args   ", style="dim")
        body.append(printable(json.dumps(call["args"], ensure_ascii=False, indent=1), keep="\n"))
        console.print(
            Panel(
                body,
                title=f"approve {escape(printable(str(call['name'])))}?",
                title_align="left",
                border_style="yellow",
                expand=False,
            )
        )
        decisions[call["id"]] = _decide(call, read, console)
    return decisions


def _decide(call: dict, read: Read, console: Console) -> dict:
    while True:
        answer = read("[a]pprove, [e]dit or [r]eject? ", "").strip().lower()
        if answer in {"a", "approve", "y", "yes"}:
            return {"action": "approve"}
        if answer in {"r", "reject", "n", "no"}:
            return {"action": "reject", "note": "the user rejected it"}
        if answer in {"e", "edit"}:
            edited = _read_args(call, read, console)
            if edited is not None:
                return {"action": "edit", "args": edited}
            continue
        console.print("answer a, e or r")


def _read_args(call: dict, read: Read, console: Console) -> dict | None:
    text = read("new arguments as JSON: ", json.dumps(call["args"], ensure_ascii=False))
    try:
        args = json.loads(text)
    except ValueError as exc:
        console.print(f"[red]not valid JSON ({exc}); try again[/red]")
        return None
    if not isinstance(args, dict):
        console.print("[red]the arguments must be a JSON object; try again[/red]")
        return None
    return args
