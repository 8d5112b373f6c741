"""How threads and the time-travel commands look in a terminal: the thread list, a thread's turns,
its checkpoints, its branch tree, and what a strategy keeps in a checkpoint (`threads list`,
`history`, `show`, the REPL's /threads and /history).

Tables fit the terminal: ids are short (`short_id`) and never cut, free text wraps between words
(a word too long for its column ends in "…"; a thread's title is cut to one line), and when the width runs short the least important
columns are left out, whole."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from rich import box
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from app.cli.hints import command
from app.service.threads import short_id
from app.text import plural, shown

if TYPE_CHECKING:
    from app.service.index import CheckpointIndex

TEXT_MIN_WIDTH = 16  # the narrowest a free-text column (an input, a title) gets
STATUS_STYLES = {
    "answered": "green",
    "failed": "red",
    # Stopped before answering (app/service/outcome.py): not a success either.
    "budget_exhausted": "red",
    "max_iterations": "red",
    "loop_detected": "red",
    "cancelled": "yellow",
    "interrupted": "yellow",
}


def human_time(iso: str, now: datetime | None = None) -> str:
    """'3 minutes ago' for an ISO 8601 time with its offset (the JSON output keeps the ISO form)."""
    import humanize

    when = datetime.fromisoformat(iso)
    if when.tzinfo is None:
        return iso
    return humanize.naturaltime(max((now or datetime.now(UTC)) - when, timedelta(0)))


@dataclass(frozen=True)
class Column:
    """A column and how much it matters: priority 0 is always shown; when the width runs short
    the highest priority number goes first. A `text` column takes the room that is left."""

    header: str
    priority: int = 0
    justify: JustifyMethod = "left"
    text: bool = False
    one_line: bool = False  # a text column whose cells are cut with "…" rather than wrapped


def fitted_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], width: int, **options
) -> Table:
    """A table of the columns that fit in `width` characters, rows cut to match."""
    kept = list(range(len(columns)))
    while _width_needed(columns, rows, kept) > width:
        droppable = [i for i in kept if columns[i].priority > 0]
        if not droppable:
            break
        kept.remove(max(droppable, key=lambda i: (columns[i].priority, i)))
    # expand: a title wraps at the terminal's width, not the columns'
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, expand=True, **options)
    for i in kept:
        column = columns[i]
        table.add_column(
            column.header,
            justify=column.justify,
            no_wrap=not column.text or column.one_line,
            overflow="ellipsis" if column.text else "fold",
            min_width=_min_width(i, columns, rows),
            ratio=1 if column.text else None,
        )
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    return table


def _min_width(index: int, columns: Sequence[Column], rows: Sequence[Sequence]) -> int:
    """A text column's own minimum; any other column is as wide as its widest cell."""
    column = columns[index]
    if column.text:
        return max(len(column.header), TEXT_MIN_WIDTH)
    cells = [Text(line).cell_len for row in rows for line in str(row[index]).splitlines()]
    return max([len(column.header), *cells])


def _width_needed(columns: Sequence[Column], rows: Sequence[Sequence], kept: list[int]) -> int:
    # Each column is padded by one space on either side and separated from the next by one.
    return sum(_min_width(i, columns, rows) for i in kept) + 3 * len(kept) - 1


def _status(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, "yellow"))


def history_table(thread: str, turns: list, width: int) -> Table:
    columns = [
        Column("turn", justify="right"),
        Column("input", text=True),
        Column("status"),
        Column("tools", priority=2),
        Column("checkpoint"),
        Column("updated", priority=3),
        Column("steps", priority=4, justify="right"),
        Column("iter", priority=5, justify="right"),
        Column("retries", priority=5, justify="right"),
    ]
    rows: list[list[str | Text]] = [
        [
            str(turn.turn),
            Text(shown(turn.preview, one_line=True)),
            _status(turn.status),
            _tool_counts(turn.tools) or "-",
            short_id(turn.checkpoint_id),
            human_time(turn.updated_at),
            str(turn.steps),
            str(turn.iteration),
            str(turn.retry_count),
        ]
        for turn in turns
    ]
    return fitted_table(columns, rows, width, title=f"thread {thread}")


def _tool_counts(names: list[str]) -> str:
    """Each tool once, one a line, in the order of first use: 'get_weather ×2', 'calculator'."""
    counts = {name: names.count(name) for name in names}
    return "\n".join(f"{name} ×{n}" if n > 1 else name for name, n in counts.items())


def checkpoints_table(thread: str, rows: list, head: str, on_branch: set[str], width: int) -> Table:
    columns = [
        Column("checkpoint"),
        Column("turn", justify="right"),
        Column("node", priority=1),
        Column("note", priority=2),
        Column("step", priority=3, justify="right"),
        Column("created", priority=4),
        Column("source", priority=5),
    ]
    cells = [
        [
            _marked(row.checkpoint_id, head, on_branch),
            str(row.turn or ""),
            shown(row.node, one_line=True),
            Text(shown(row.note, one_line=True)),
            str(row.step),
            human_time(row.created_at),
            row.source,
        ]
        for row in rows
    ]
    title = f"thread {thread}: every checkpoint, newest first (* head, · current branch)"
    return fitted_table(columns, cells, width, title=title)


def _marked(checkpoint_id: str, head: str, on_branch: set[str]) -> str:
    mark = "*" if checkpoint_id == head else ("·" if checkpoint_id in on_branch else " ")
    return f"{mark} {short_id(checkpoint_id)}"


def branch_tree(index: CheckpointIndex) -> Tree:
    """The current branch as a flat list of turns; every branch that a rollback or replay left behind
    hangs, flat as well, under the checkpoint where it split off."""
    children = index.children()
    head = index.head.checkpoint_id
    on_branch = {r.checkpoint_id for r in index.branch()}
    root = Tree(f"thread {index.thread_id}")
    stack = [(root, row) for row in reversed(children.get(None, []))]
    while stack:
        level, row = stack.pop()
        segment = [row]
        while True:
            kids = children.get(segment[-1].checkpoint_id, [])
            if len(kids) != 1 or kids[0].turn != row.turn or kids[0].note:
                break
            segment.append(kids[0])
        node = level.add(_segment_label(segment, head, on_branch))
        kids = children.get(segment[-1].checkpoint_id, [])
        ahead = [k for k in kids if k.checkpoint_id in on_branch] or kids[:1]
        for other in reversed([k for k in kids if k not in ahead]):
            stack.append((node.add("[dim]branch[/dim]"), other))
        stack.extend((level, k) for k in ahead)
    return root


def _segment_label(segment: list, head: str, on_branch: set[str]) -> Text:
    """The segment's last checkpoint id first (what a user copies), its preview last (what the
    width cuts, with "…")."""
    first, last = segment[0], segment[-1]
    turn = f"turn {first.turn}" if first.turn is not None else "start"
    label = Text(no_wrap=True, overflow="ellipsis")
    label.append(short_id(last.checkpoint_id), style="bold")
    label.append(f" {turn} · {plural(len(segment), 'checkpoint')}")
    if first.note:
        label.append(f" · {shown(first.note, one_line=True)}", style="magenta")
    if any(r.checkpoint_id == head for r in segment):
        label.append(" ← head", style="green")
    elif last.checkpoint_id not in on_branch:
        label.stylize("dim")
    label.append(f" · {shown(first.preview, one_line=True)}")
    return label


# What a strategy keeps in the state besides the tool loop's fields (graphs/plan/state.py,
# reflexion/state.py, routed/state.py); `show` prints whichever a checkpoint has.
STRATEGY_FIELDS = (
    "strategy",
    "plan",
    "step_results",
    "replans",
    "route",
    "trial",
    "verdict",
    "lessons",
)


def strategy_lines(fields: dict) -> list[str]:
    """One line per plan step (with its result when it ran) and per other strategy field."""
    results = {r.get("step"): r for r in fields.get("step_results", [])}
    lines = []
    for key, value in fields.items():
        if key == "plan":
            lines += [_plan_line(n, step, results.get(n)) for n, step in enumerate(value, 1)]
        elif key != "step_results":
            lines.append(shown(f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}"))
    return lines


def _plan_line(number: int, step: dict, result: dict | None) -> str:
    """`plan 1. get_weather city: Paris · date: today → success: Paris on …`: each argument and
    the result cut between words (`call_summary`)."""
    from app.cli.approval_ui import call_summary, clipped

    call = call_summary({"name": step.get("tool"), "args": step.get("arguments", {})})
    if result is None:
        return f"plan {number}. {call}"
    said = shown(clipped(str(result.get("result"))), one_line=True)
    return f"plan {number}. {call} → {result.get('status')}: {said}"


def threads_table(threads: list, width: int, *, numbered: bool = False) -> Table | str:
    """Every thread, newest first; `numbered` puts a number in front of each (the REPL's
    /threads, so /switch N picks one)."""
    if not threads:
        return f"no threads yet; start one with: {command('chat', '--thread', 'demo')}"
    interrupted = any(t.interrupted for t in threads)
    columns = [
        *([Column("#", justify="right")] if numbered else []),
        Column("thread"),
        Column("title", text=True, one_line=True),  # one line a thread
        Column("turns", priority=1, justify="right"),
        *([Column("state")] if interrupted else []),
        Column("updated", priority=2),
        Column("size", priority=3, justify="right"),
        Column("checkpoints", priority=4, justify="right"),
    ]
    rows = [
        [
            *([str(number)] if numbered else []),
            t.thread_id,
            Text(shown(t.title, one_line=True)),
            str(t.turns),
            *(
                [Text("interrupted" if t.interrupted else "", style="yellow")]
                if interrupted
                else []
            ),
            human_time(t.updated_at),
            human_bytes(t.size_bytes),
            str(t.checkpoints),
        ]
        for number, t in enumerate(threads, 1)
    ]
    return fitted_table(columns, rows, width)


def human_bytes(size: int) -> str:
    amount = float(size)
    for unit in ("B", "KB", "MB"):
        if amount < 1024:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GB"
