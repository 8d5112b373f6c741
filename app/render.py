"""Show a turn's stream: live tokens, tool cards, retry lines, a failure panel — or JSON lines for scripts."""

from __future__ import annotations

import json
from typing import Any, Protocol

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from app.errors import printable
from app.models.react.model import UNPARSED  # a ReAct reply taken as the answer without parsing

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


class Renderer(Protocol):
    def event(self, mode: str, payload: Any) -> None: ...
    def notice(self, text: str) -> None: ...
    def turn_end(self, summary: dict) -> None: ...
    def partial_answer(self) -> str: ...


def message_dict(message: BaseMessage) -> dict:
    """A compact, JSON-safe view of a message for --jsonl and --stream updates."""
    data: dict[str, Any] = {"type": message.type, "content": message.content}
    for key in ("name", "tool_call_id", "status"):
        if getattr(message, key, None):
            data[key] = getattr(message, key)
    if isinstance(message, AIMessage) and message.response_metadata.get(UNPARSED):
        data["unparsed"] = True
    if isinstance(message, AIMessage) and message.tool_calls:
        data["tool_calls"] = [
            {"name": c["name"], "args": c["args"], "id": c["id"]} for c in message.tool_calls
        ]
    return data


def update_dict(update: Any) -> Any:
    if not isinstance(update, dict):
        return update
    return {
        key: [message_dict(m) for m in value] if key == "messages" else value
        for key, value in update.items()
    }


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
        self._calls: dict[str, dict] = {}
        self._streamed: set[str] = set()
        self._partial: list[str] = []
        self._line_open = False
        self.live = out.is_terminal

    def event(self, mode: str, payload: Any) -> None:
        if mode == "messages":
            self._token(*payload)
        elif mode == "custom":
            self._custom(payload)
        elif mode == "updates":
            for node, update in payload.items():
                self._node_update(node, update)

    def notice(self, text: str) -> None:
        self._close_line()
        self.err.print(f"[dim]{escape(printable(text))}[/dim]")

    def partial_answer(self) -> str:
        return "".join(self._partial)

    def turn_end(self, summary: dict) -> None:
        self._close_line()
        if summary["status"] not in {"answered", "failed"}:
            self.err.print(f"[yellow]turn ended: {summary['status']}[/yellow]")

    def _token(self, chunk: Any, metadata: dict) -> None:
        if not isinstance(chunk, AIMessageChunk) or not isinstance(chunk.content, str):
            return
        if metadata.get("langgraph_node") not in ANSWER_NODES or not chunk.content:
            return
        self._partial.append(chunk.content)
        if not self.live:
            return
        if chunk.id:
            self._streamed.add(chunk.id)
        self.out.print(chunk.content, end="", markup=False, highlight=False, soft_wrap=True)
        self._line_open = True

    def _custom(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "tool_call":
            self._calls[event["id"]] = event
            self._close_line()
            args = printable(json.dumps(event["args"], ensure_ascii=False))
            self.err.print(f"[dim]→ {escape(printable(event['name']))} {escape(args[:200])}[/dim]")
        elif kind == "tool_result":
            self._tool_card(event)
        elif kind == "retry":
            self._close_line()
            wait = f" in {event['wait']:.2f}s" if event["wait"] else ""
            self.err.print(
                f"[yellow]↻ retry {event['attempt']}/{event['max_attempts']}{wait}[/yellow] "
                f"[dim]({event['kind']}) {escape(str(event['reason'])[:300])}[/dim]"
            )
        elif kind == "summarized":
            self._close_line()
            self.err.print(Text(f"⋯ {summarized_text(event)}", style="dim"), soft_wrap=False)
        elif kind in STRATEGY_EVENTS:
            self._close_line()
            self.err.print(Text(STRATEGY_EVENTS[kind](event), style="dim"))
        elif kind == "error" and self.debug:
            self.err.print(Text(event["traceback"], style="red"))

    def _tool_card(self, event: dict) -> None:
        self._close_line()
        call = self._calls.get(event["id"], {})
        args = printable(json.dumps(call.get("args", {}), ensure_ascii=False))
        ok = event["status"] == "success"
        # A result's own lines stay lines; any other control character (ESC…) is shown escaped.
        content = printable(str(event["content"]), keep="\n\t")
        if len(content) > CARD_RESULT_CHARS:
            content = content[:CARD_RESULT_CHARS] + " …"
        body = Text()
        body.append("args   ", style="dim")
        body.append(args + "\n")
        body.append("result " if ok else "error  ", style="dim" if ok else "red")
        body.append(content, style=None if ok else "red")
        name = escape(printable(str(event["name"])))
        title = f"{'🔧' if ok else '✗'} {name}  [dim]{event['duration_ms']} ms[/dim]"
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
                self.notice(UNPARSED_NOTICE)

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
    """One JSON object per line on stdout: node, token, tool_call, tool_result, retry, error, final.
    An `error` event (a bug inside a node) carries its traceback only with `debug` (--debug)."""

    def __init__(self, out: Console, *, debug: bool = False) -> None:
        self.out = out
        self.debug = debug
        self._partial: list[str] = []

    def _emit(self, event: dict) -> None:
        if event.get("event") == "error" and not self.debug:
            event = {key: value for key, value in event.items() if key != "traceback"}
        self.out.file.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self.out.file.flush()

    def event(self, mode: str, payload: Any) -> None:
        if mode == "messages":
            chunk, metadata = payload
            if (
                isinstance(chunk, AIMessageChunk)
                and isinstance(chunk.content, str)
                and chunk.content
            ):
                self._partial.append(chunk.content)
                self._emit(
                    {
                        "event": "token",
                        "node": metadata.get("langgraph_node"),
                        "text": chunk.content,
                    }
                )
        elif mode == "custom":
            event = dict(payload)
            self._emit({"event": event.pop("type"), **event})
        elif mode == "updates":
            for node, update in payload.items():
                self._emit({"event": "node", "node": node, "update": update_dict(update)})

    def notice(self, text: str) -> None:
        self._emit({"event": "notice", "text": text})

    def partial_answer(self) -> str:
        return "".join(self._partial)

    def turn_end(self, summary: dict) -> None:
        self._emit({"event": "final", **summary})


def summarized_text(event: dict) -> str:
    """What a `summarized` event tells the user: why, against which window, and what is kept."""
    replaced = f"{event['messages_replaced']} older messages"
    if event.get("window"):
        why = f"the conversation is longer than the model's {event['window']:,}-token window"
    elif event.get("budget"):
        why = f"the conversation is longer than the context budget ({event['budget']:,} tokens)"
    else:
        why = "the conversation no longer fits the model's context"
    dropped = (
        f"; the oldest {event['dropped_lines']} lines did not fit even the summariser and were "
        "left out"
        if event.get("dropped_lines")
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
