"""Asking the person at the terminal to approve, edit or reject risky tool calls: each argument a
field, code shown as code (highlighted, numbered when long), and an edit made to one field — in
$EDITOR for code or several lines, on the prompt for a short value — never to JSON."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from app.text import shown

if TYPE_CHECKING:
    from graphs.shared.approvals import ApprovalDecision, ApprovalRequest

Read = Callable[[str, str], str]  # (question, default) -> answer
Edit = Callable[[str, str], str | None]  # (text, file suffix) -> the edited text, None: unchanged
NUMBERED_FROM = 6  # code of this many lines or more is shown with line numbers
CODE_ARGUMENTS = {"code", "content", "old_text", "new_text"}  # shown as code, edited in $EDITOR


def ask_approval(
    calls: list[ApprovalRequest], read: Read, console: Console, edit: Edit | None = None
) -> dict[str, ApprovalDecision]:
    """One decision per call: approve, reject, or edit one of its arguments."""
    decisions = {}
    for call in calls:
        console.print(approval_panel(call), soft_wrap=False)
        decisions[call["id"]] = _decide(call, read, console, edit or edit_text)
    return decisions


def approval_panel(call: Mapping[str, Any]) -> Panel:
    """The call (an ApprovalRequest, or a tool call with its `reason`) as the person reads it: why
    it is asked, then each argument, code as code."""
    fields = Table.grid(padding=(0, 1))
    fields.add_column(style="dim", no_wrap=True)
    fields.add_column()
    fields.add_row("why", Text(shown(f"it {call['reason']}")))
    args = call["args"] if isinstance(call["args"], dict) else {"arguments": call["args"]}
    for key, value in args.items():
        fields.add_row(Text(shown(str(key), one_line=True)), _value(str(key), value, args))
    return Panel(
        fields,
        title=Text.assemble("approve ", (shown(str(call["name"]), one_line=True), "bold"), "?"),
        title_align="left",
        border_style="yellow",
    )


def _value(key: str, value: Any, args: dict) -> RenderableType:
    if not isinstance(value, str):
        return Text(shown(json.dumps(value, ensure_ascii=False), one_line=True))
    if key in CODE_ARGUMENTS or "\n" in value:
        return code_view(value, _suffix(key, args))
    return Text(shown(value))


def code_view(code: str, suffix: str) -> RenderableType:
    """Highlighted, lines wrapped (not cut), numbered from NUMBERED_FROM lines on."""
    lines = code.count("\n") + 1
    lexer = Syntax.guess_lexer(f"x{suffix}", code)
    return Group(
        Syntax(
            shown(code),
            lexer,
            line_numbers=lines >= NUMBERED_FROM,
            word_wrap=True,
            theme="ansi_dark",
            background_color="default",
        )
    )


def _suffix(key: str, args: dict) -> str:
    """The file suffix that names the code's language: .py for code run as Python, else the
    suffix of the file the call writes."""
    if key == "code":
        return ".py"
    return Path(str(args.get("path", ""))).suffix or ".txt"


def _decide(call: ApprovalRequest, read: Read, console: Console, edit: Edit) -> ApprovalDecision:
    while True:
        answer = read("[a]pprove, [e]dit or [r]eject? ", "").strip().lower()
        if answer in {"a", "approve", "y", "yes"}:
            return {"action": "approve"}
        if answer in {"r", "reject", "n", "no"}:
            return {"action": "reject", "note": "the user rejected it"}
        if answer in {"e", "edit"}:
            edited = _edited_args(call, read, console, edit)
            if edited is not None:
                console.print(approval_panel({**call, "args": edited}), soft_wrap=False)
                return {"action": "edit", "args": edited}
            continue
        console.print("answer a, e or r", markup=False)


def _edited_args(
    call: ApprovalRequest, read: Read, console: Console, edit: Edit
) -> dict[str, Any] | None:
    """The arguments with the field the person chose edited; None when nothing changed."""
    args = dict(call["args"])
    if not args:
        console.print("this call has no arguments to edit", markup=False)
        return None
    key = next(iter(args)) if len(args) == 1 else _pick_field(list(args), read, console)
    if key is None:
        return None
    value = args[key]
    if isinstance(value, str) and (key in CODE_ARGUMENTS or "\n" in value):
        changed = edit(value, _suffix(key, args))
    elif isinstance(value, str):
        changed = read(f"{key}: ", value)
    else:
        changed = _read_json_field(key, value, read, console)
        if changed is None:
            return None
        args[key] = changed
        return args
    if changed is None or changed == value:
        console.print(f"{key} unchanged", markup=False)
        return None
    args[key] = changed
    return args


def _pick_field(keys: list[str], read: Read, console: Console) -> str | None:
    answer = read(f"edit which argument ({', '.join(keys)})? ", keys[0]).strip()
    if answer in keys:
        return answer
    console.print(f"no argument named {shown(answer, one_line=True)!r}", markup=False)
    return None


def _read_json_field(key: str, value: Any, read: Read, console: Console) -> Any | None:
    text = read(f"{key} (a JSON value): ", json.dumps(value, ensure_ascii=False))
    try:
        return json.loads(text)
    except ValueError as exc:
        console.print(f"not a JSON value ({exc}); try again", markup=False)
        return None


def edit_text(text: str, suffix: str) -> str | None:
    """`text` edited by the person: in $VISUAL or $EDITOR (a temporary file with `suffix`, so the
    editor highlights it), else on a multi-line prompt (Esc then Enter finishes)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        from prompt_toolkit import prompt

        return prompt("edit, then Esc Enter to finish:\n", default=text, multiline=True)
    with tempfile.TemporaryDirectory(prefix="waypoint-edit-") as folder:
        path = Path(folder) / f"argument{suffix}"
        path.write_text(text, encoding="utf-8")
        # No shell: EDITOR is split as a command line ("code --wait"), the path passed as is.
        status = subprocess.run([*shlex.split(editor), str(path)], check=False).returncode
        if status != 0:
            return None
        edited = path.read_text(encoding="utf-8")
    # An editor adds a final newline the value did not have.
    return edited[:-1] if edited.endswith("\n") and not text.endswith("\n") else edited


SUMMARY_VALUE_CELLS = 40  # how much of each argument a one-line summary shows
TEMPLATE = re.compile(r"\{\{\s*step\s+(\d+)(?:\.(\w+))?\s*\}\}")


def call_summary(call: dict) -> str:
    """`write_file path: trip.txt · content: Paris on 2026-12-03: cloudy, …` — each value on one
    line, cut between words, and a plan's reference to an earlier result ({{step 1.city}}) said
    in words, never cut in the middle."""
    args = call["args"] if isinstance(call["args"], dict) else {"arguments": call["args"]}
    fields = " · ".join(f"{key}: {clipped(_readable(value))}" for key, value in args.items())
    return shown(f"{call['name']} {fields}".strip(), one_line=True)


def _readable(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return TEMPLATE.sub(
        lambda m: f"‹step {m.group(1)}'s {m.group(2)}›" if m.group(2) else f"‹step {m.group(1)}›",
        text,
    )


def clipped(text: str, cells: int = SUMMARY_VALUE_CELLS) -> str:
    """`text` on one line, at most `cells` wide: cut between words, with "…"."""
    text = " ".join(text.split())
    if cell_len(text) <= cells:
        return text
    cut = set_cell_size(text, cells - 1)
    if " " in cut[cells // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"
