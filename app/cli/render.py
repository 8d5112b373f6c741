"""Show a turn's stream: live tokens, tool cards, retry lines, a failure panel — or JSON lines for scripts."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from app.errors import printable
from app.models.react.model import UNPARSED  # a ReAct reply taken as the answer without parsing
from app.service.events import (
    Event,
    MessageOut,
    NodeFailed,
    NodeUpdate,
    Notice,
    Retry,
    StateValues,
    StrategyNote,
    Summarized,
    Token,
    ToolCallStarted,
    ToolFinished,
    TurnEnd,
    as_json,
    update_dict,
)

ANSWER_NODES = {"agent", "finalize", "failure_handler", "synthesizer", "calculator", "small_talk"}
# Nodes that run the tool loop as a subgraph: its own nodes already showed what they added.
SUBGRAPH_NODES = {"attempt", "tool_loop"}
# Nodes whose messages are not new: summarize rewrites the list, re-sending the recent turns.
REWRITING_NODES = {*SUBGRAPH_NODES, "summarize"}
CARD_RESULT_CHARS = 600
UNPARSED_NOTICE = (
    "(the model's reply followed neither the Action nor the Final Answer format after the "
    "corrections; it is shown as the answer, as written)"
)


def _plan_lines(event: dict) -> str:
    title = "re-plan of the remaining steps:" if event["replan"] else "plan:"
    if not event["steps"]:
        return f"{title} no steps (answering without tools)"
    return "\n".join([title, *(f"  {line}" for line in event["steps"])])


STRATEGY_EVENTS = {
    "plan": _plan_lines,
    "step_skipped": lambda e: f"step {e['step']} skipped: {e['reason']}",
    "trial": lambda e: f"attempt {e['trial']}/{e['max_trials']}",
    "verdict": lambda e: (
        f"{'✓' if e['success'] else '✗'} evaluation of attempt {e['trial']}: "
        f"{'success' if e['success'] else 'failure'} — {e['reason']}"
    ),
    "lesson": lambda e: f"lesson: {e['lesson']}",
    "route": lambda e: f"route: {e['path']} ({e['reason']})",
}


class ConsoleRenderer:
    """Answers on stdout; tool cards, retries and progress on stderr (`out` and `err` consoles).

    On a terminal, model tokens are shown as they arrive. When stdout is piped, it receives exactly
    the answers: text that came with tool calls (a model "thinking aloud") goes to stderr instead.
    """

    def __init__(
        self, out: Console, err: Console, *, show_updates: bool = False, debug: bool = False
    ) -> None:
        self.out, self.err = out, err
        self.show_updates, self.debug = show_updates, debug
        self._calls: dict[str, ToolCallStarted] = {}
        self._streamed: set[str] = set()
        self._partial: list[str] = []
        self._line_open = False
        self.live = out.is_terminal

    def emit(self, event: Event) -> None:
        match event:
            case Token():
                self._token(event)
            case ToolCallStarted():
                self._calls[event.id] = event
                self._close_line()
                args = printable(json.dumps(event.args, ensure_ascii=False))
                self.err.print(f"[dim]→ {escape(printable(event.tool))} {escape(args[:200])}[/dim]")
            case ToolFinished():
                self._tool_card(event)
            case Retry():
                self._close_line()
                wait = f" in {event.wait:.2f}s" if event.wait else ""
                self.err.print(
                    f"[yellow]↻ retry {event.attempt}/{event.max_attempts}{wait}[/yellow] "
                    f"[dim]({event.kind}) {escape(str(event.reason)[:300])}[/dim]"
                )
            case Summarized():
                self._close_line()
                self.err.print(Text(f"⋯ {summarized_text(event)}", style="dim"), soft_wrap=False)
            case StrategyNote():
                self._close_line()
                self.err.print(Text(STRATEGY_EVENTS[event.kind](event.data), style="dim"))
            case NodeFailed():
                if self.debug:
                    self.err.print(Text(event.traceback, style="red"))
            case NodeUpdate():
                self._node_update(event.node, event.update)
            case Notice():
                self._close_line()
                self.err.print(f"[dim]{escape(printable(event.text))}[/dim]")
            case TurnEnd():
                self._close_line()
                if event.status not in {"answered", "failed"}:
                    self.err.print(f"[yellow]turn ended: {event.status}[/yellow]")

    def partial_answer(self) -> str:
        return "".join(self._partial)

    def _token(self, token: Token) -> None:
        if token.node not in ANSWER_NODES or not token.text:
            return
        self._partial.append(token.text)
        if not self.live:
            return
        if token.message_id:
            self._streamed.add(token.message_id)
        self.out.print(token.text, end="", markup=False, highlight=False, soft_wrap=True)
        self._line_open = True

    def _tool_card(self, event: ToolFinished) -> None:
        self._close_line()
        call = self._calls.get(event.id)
        args = printable(json.dumps(call.args if call else {}, ensure_ascii=False))
        ok = event.status == "success"
        # A result's own lines stay lines; any other control character (ESC…) is shown escaped.
        content = printable(event.content, keep="\n\t")
        if len(content) > CARD_RESULT_CHARS:
            content = content[:CARD_RESULT_CHARS] + " …"
        body = Text()
        body.append("args   ", style="dim")
        body.append(args + "\n")
        body.append("result " if ok else "error  ", style="dim" if ok else "red")
        body.append(content, style=None if ok else "red")
        name = escape(printable(event.tool))
        title = f"{'🔧' if ok else '✗'} {name}  [dim]{event.duration_ms} ms[/dim]"
        self.err.print(
            Panel(
                body,
                title=title,
                title_align="left",
                border_style="cyan" if ok else "red",
                expand=False,
            ),
            soft_wrap=False,
        )

    def _node_update(self, node: str, update: Any) -> None:
        if self.show_updates:
            self._close_line()
            self.err.print(f"[bold magenta]── {escape(node)}[/bold magenta]")
            self.err.print_json(json.dumps(update_dict(update), ensure_ascii=False, default=str))
        if not isinstance(update, dict) or node in REWRITING_NODES:
            return
        for message in update.get("messages", []):
            if isinstance(message, AIMessage) and message.id not in self._streamed:
                self._unstreamed_answer(node, message)
            if isinstance(message, AIMessage) and message.response_metadata.get(UNPARSED):
                self.emit(Notice(UNPARSED_NOTICE))

    def _unstreamed_answer(self, node: str, message: AIMessage) -> None:
        text = str(message.content).strip()
        if not text:
            return
        self._close_line()
        if node == "failure_handler":
            # soft_wrap=False: the console soft-wraps (long lines stay whole for copying), which
            # would make the panel crop its own message.
            self.err.print(
                Panel(escape(text), title="turn failed", border_style="red", title_align="left"),
                soft_wrap=False,
            )
        elif message.tool_calls or message.invalid_tool_calls:
            self.err.print(Text(text, style="dim italic"))
        else:
            self.out.print(text, markup=False, highlight=False)

    def _close_line(self) -> None:
        if self._line_open:
            self.out.print()
            self._line_open = False


class JsonlRenderer:
    """One JSON object per line on stdout (app/service/events.py `as_json`): node, token,
    tool_call, tool_result, retry, error, notice, final. An `error` event (a bug inside a node)
    carries its traceback only with `debug` (--debug)."""

    def __init__(self, out: Console, *, debug: bool = False) -> None:
        self.out = out
        self.debug = debug
        self._partial: list[str] = []

    def emit(self, event: Event) -> None:
        if isinstance(event, MessageOut | StateValues) or (
            isinstance(event, Token) and not event.text
        ):
            return  # what the --jsonl events never carried (LangGraph API clients get them)
        if isinstance(event, Token):
            self._partial.append(event.text)
        line = json.dumps(as_json(event, traceback=self.debug), ensure_ascii=False, default=str)
        self.out.file.write(line + "\n")
        self.out.file.flush()

    def partial_answer(self) -> str:
        return "".join(self._partial)


def summarized_text(event: Summarized) -> str:
    """What a `summarized` event tells the user: why, against which window, and what is kept."""
    replaced = f"{event.messages_replaced} older messages"
    if event.window:
        why = f"the conversation is longer than the model's {event.window:,}-token window"
    elif event.budget:
        why = f"the conversation is longer than the context budget ({event.budget:,} tokens)"
    else:
        why = "the conversation no longer fits the model's context"
    dropped = (
        f"; the oldest {event.dropped_lines} lines did not fit even the summariser and were "
        "left out"
        if event.dropped_lines
        else ""
    )
    return (
        f"{why}; older turns were summarised ({replaced}{dropped}; older checkpoints, history "
        "and export keep them all)"
    )


def print_messages(console: Console, messages: list[BaseMessage]) -> None:
    """A stored conversation, shown the way the chat showed it."""
    for message in messages:
        if message.type == "human":
            console.print(Text("you  ", style="bold green") + Text(str(message.content)))
        elif message.type == "ai":
            if str(message.content).strip():
                console.print(Text("agent ", style="bold cyan") + Text(str(message.content)))
            for call in getattr(message, "tool_calls", []):
                args = json.dumps(call["args"], ensure_ascii=False)
                console.print(Text(f"  → {call['name']} {args}", style="dim"))
        elif message.type == "tool":
            ok = getattr(message, "status", "success") != "error"
            mark = Text("  ✓ " if ok else "  ✗ ", style="green" if ok else "red")
            content = str(message.content)
            if len(content) > CARD_RESULT_CHARS:
                content = content[:CARD_RESULT_CHARS] + " …"
            console.print(mark + Text(f"{message.name}: {content}", style=None if ok else "red"))
        else:
            console.print(Text(f"{message.type}: {message.content}", style="dim"))
