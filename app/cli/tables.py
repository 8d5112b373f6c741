"""How threads and the time-travel commands look in a terminal: the thread list, a thread's turns,
its checkpoints, its branch tree, and what a strategy keeps in a checkpoint (`threads list`,
`history`, `show`, the REPL's /threads and /history)."""

from __future__ import annotations

import json

from rich.markup import escape
from rich.table import Table
from rich.tree import Tree


def history_table(thread: str, turns: list) -> Table:
    table = Table(title=f"thread {thread}")
    table.add_column("turn", justify="right", no_wrap=True)
    table.add_column("input", ratio=1, min_width=16, overflow="fold")
    table.add_column("status", no_wrap=True, min_width=9)
    for counter in ("steps", "iter", "retries"):
        table.add_column(counter, justify="right", no_wrap=True)
    table.add_column("tools", overflow="fold")
    table.add_column("checkpoint", overflow="fold")
    for turn in turns:
        table.add_row(
            str(turn.turn),
            turn.preview,
            turn.status,
            str(turn.steps),
            str(turn.iteration),
            str(turn.retry_count),
            ", ".join(turn.tools) or "-",
            turn.checkpoint_id,
        )
    return table


def checkpoints_table(thread: str, rows: list, head: str, on_branch: set[str]) -> Table:
    table = Table(title=f"thread {thread}: every checkpoint (* head, · current branch)")
    for name in ("", "checkpoint", "step", "turn", "node", "source", "note", "created"):
        table.add_column(name, overflow="fold")
    for row in rows:
        mark = "*" if row.checkpoint_id == head else ("·" if row.checkpoint_id in on_branch else "")
        table.add_row(
            mark,
            row.checkpoint_id,
            str(row.step),
            str(row.turn or ""),
            row.node,
            row.source,
            row.note,
            row.created_at,
        )
    return table


def branch_tree(index) -> Tree:  # type: ignore[no-untyped-def]
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


def _segment_label(segment: list, head: str, on_branch: set[str]) -> str:
    first, last = segment[0], segment[-1]
    turn = f"turn {first.turn}" if first.turn is not None else "start"
    note = f" [magenta]{escape(first.note)}[/magenta]" if first.note else ""
    steps = f"{len(segment)} checkpoint{'s' if len(segment) > 1 else ''}"
    text = f"{turn} · {escape(first.preview[:50])} · {steps} · …{last.checkpoint_id[-12:]}{note}"
    if any(r.checkpoint_id == head for r in segment):
        return f"[bold]{text}[/bold] [green]← head[/green]"
    return text if last.checkpoint_id in on_branch else f"[dim]{text}[/dim]"


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
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}")
    return lines


def _plan_line(number: int, step: dict, result: dict | None) -> str:
    args = json.dumps(step.get("arguments", {}), ensure_ascii=False)
    outcome = f" → {result.get('status')}: {str(result.get('result'))[:80]}" if result else ""
    return f"plan {number}. {step.get('tool')} {args}{outcome}"


def threads_table(threads: list) -> Table | str:
    if not threads:
        return "no threads yet; start one with: python -m app chat --thread demo"
    table = Table("thread", "title", "turns", "checkpoints", "size", "updated", "")
    for t in threads:
        table.add_row(
            t.thread_id,
            t.title[:50],
            str(t.turns),
            str(t.checkpoints),
            human_bytes(t.size_bytes),
            t.updated_at,
            "[yellow]interrupted[/yellow]" if t.interrupted else "",
        )
    return table


def human_bytes(size: int) -> str:
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
