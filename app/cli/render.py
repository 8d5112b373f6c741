"""Show a turn's stream: live tokens, tool cards, retry lines, a failure panel — or JSON lines for scripts."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast, overload

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from app.cli.answer import StreamedAnswer, print_answer
from app.cli.cards import tool_card
from app.cli.progress import Progress
from app.models.react.model import UNPARSED  # a ReAct reply taken as the answer without parsing
from app.service.events import (
    Event,
    GraphChunk,
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
from app.text import shown
from graphs.shared.tool_calls import for_user

ANSWER_NODES = {"agent", "finalize", "failure_handler", "synthesizer", "calculator", "small_talk"}
# Nodes that run the tool loop as a subgraph: its own nodes already showed what they added.
SUBGRAPH_NODES = {"attempt", "tool_loop"}
# Nodes whose messages are not new: summarize rewrites the list, re-sending the recent turns.
REWRITING_NODES = {*SUBGRAPH_NODES, "summarize"}
CARD_RESULT_CHARS = 600
THINKING = "thinking"
Asking = TypeVar("Asking", bound=Callable[..., Any])
UNPARSED_NOTICE = (
    "(the model's reply followed neither the Action nor the Final Answer format after the "
    "corrections; it is shown as the answer, as written)"
)


def _plan_lines(event: dict) -> RenderableType:
    """The plan, a step a row: its number, then the tool and each argument in words (a reference
    to an earlier step's result said as such), wrapping under itself."""
    title = "re-plan of the remaining steps:" if event["replan"] else "plan:"
    if event.get("continued"):
        title = "the rest of the plan, from the results:"
    if not event["steps"]:
        return f"{title} no steps (answering without tools)"
    steps = Table.grid(padding=(0, 1))
    steps.style = "dim"
    steps.add_column(justify="right", no_wrap=True)
    steps.add_column()
    for line in event["steps"]:
        number, _, step = shown(str(line), one_line=True).partition(". ")
        steps.add_row(f"  {number}.", readable_step(step))
    return Group(Text(title, style="dim"), steps)


STEP = re.compile(r"^(?P<tool>\S+) (?P<args>\{.*\})(?: — (?P<reason>.*))?$")


def readable_step(step: str) -> str:
    """`get_weather {"city": "Paris"} — weather for Paris` (as the plan lists a step) as
    `get_weather city: Paris — weather for Paris`; a step of another form is kept as it is."""
    from app.cli.approval_ui import call_summary

    match = STEP.match(step)
    if match is None:
        return step
    try:
        args = json.loads(match["args"])
    except ValueError:
        return step
    call = call_summary({"name": match["tool"], "args": args})
    return f"{call} — {match['reason']}" if match["reason"] else call


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

    On a terminal, model tokens are shown as they arrive, and while the turn waits for the model or
    a tool a spinner with the elapsed time says so (stderr on a terminal only; removed before
    anything else is printed). When stdout is piped, it receives exactly the answers: text that came
    with tool calls (a model "thinking aloud") goes to stderr instead. Use it as a context manager
    around the turn, so the spinner starts with it and is gone when it ends, however it ends.
    """

    def __init__(
        self,
        out: Console,
        err: Console,
        *,
        show_updates: bool = False,
        debug: bool = False,
        progress: Progress | None = None,
    ) -> None:
        self.out, self.err = out, err
        self.show_updates, self.debug = show_updates, debug
        self.progress = progress or Progress(err, enabled=True)
        self._calls: dict[str, ToolCallStarted] = {}
        self._running: dict[str, str] = {}  # call id → tool name, for calls not finished yet
        self._streamed: set[str] = set()
        self._partial: list[str] = []
        self._answer: StreamedAnswer | None = None  # the answer being streamed, on a terminal
        self.live = out.is_terminal
        # Reflexion: an attempt's answer is only a candidate; the last one is the turn's answer.
        self._attempts = False
        self._candidate = ""

    def __enter__(self) -> ConsoleRenderer:
        self.progress.wait(THINKING)
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    @overload
    def paused(self, ask: Asking) -> Asking: ...
    @overload
    def paused(self, ask: None) -> None: ...
    def paused(self, ask: Asking | None) -> Asking | None:
        """`ask` (an approver, a replay's confirmation) with the spinner out of the way while it
        asks the user."""
        if ask is None:
            return None

        @functools.wraps(ask)
        def asking(*args: Any, **kwargs: Any) -> Any:
            self.progress.stop()
            self._close_line()
            answer = ask(*args, **kwargs)
            self.progress.wait(THINKING)
            return answer

        return cast(Asking, asking)

    def emit(self, event: Event) -> None:
        match event:
            case Token():
                self._token(event)
            case ToolCallStarted():
                self._calls[event.id] = event
                self._running[event.id] = event.tool
                self._wait_for_tools()
            case ToolFinished():
                self._running.pop(event.id, None)
                call = self._calls.get(event.id)
                self._err(tool_card(event, call.args if call else {}), soft_wrap=False)
                self._wait_for_tools()
            case Retry() if event.kind != "tool":  # a tool error is on its card already
                wait = f" in {event.wait:.2f}s" if event.wait else ""
                self._err(
                    Text.assemble(
                        (f"↻ retry {event.attempt}/{event.max_attempts}{wait}", "yellow"),
                        (shown(f" ({event.kind}) {event.reason[:300]}", one_line=True), "dim"),
                    )
                )
                self.progress.wait(f"retry {event.attempt}/{event.max_attempts}")
            case Summarized():
                self._err(Text(f"⋯ {summarized_text(event)}", style="dim"), soft_wrap=False)
                self.progress.wait(THINKING)
            case StrategyNote():
                self._attempts = self._attempts or event.kind == "trial"
                said = STRATEGY_EVENTS[event.kind](event.data)
                self._err(Text(shown(said), style="dim") if isinstance(said, str) else said)
                self.progress.wait(THINKING)
            case NodeFailed():
                if self.debug:
                    self._err(Text(event.traceback, style="red"))
            case NodeUpdate():
                self._node_update(event.node, event.update)
            case Notice():
                self._err(Text(shown(event.text, one_line=True), style="dim"))
            case TurnEnd():
                self._end(event)

    def partial_answer(self) -> str:
        return "".join(self._partial)

    def _wait_for_tools(self) -> None:
        running = list(dict.fromkeys(self._running.values()))
        self.progress.wait(f"running {', '.join(running)}" if running else THINKING)

    def _err(self, renderable: Any, **options: Any) -> None:
        """Print on stderr, the spinner and any open answer line out of the way first."""
        self.progress.stop()
        self._close_line()
        self.err.print(renderable, **options)

    def _end(self, event: TurnEnd) -> None:
        self.progress.stop()
        self._close_line()
        if self._candidate:
            print_answer(self.out, self._candidate)
            self._candidate = ""
        if event.status not in {"answered", "failed"}:
            self.err.print(f"[yellow]turn ended: {event.status}[/yellow]")

    def _token(self, token: Token) -> None:
        if token.node not in ANSWER_NODES or not token.text:
            return
        self._partial.append(token.text)
        if not self.live or self._attempts:
            return
        if token.message_id:
            self._streamed.add(token.message_id)
        self.progress.stop()
        if self._answer is None:
            self._answer = StreamedAnswer(self.out)
        self._answer.feed(token.text)

    def _node_update(self, node: str, update: Any) -> None:
        if self.show_updates:
            self._err(f"[bold magenta]── {escape(node)}[/bold magenta]")
            self.progress.stop()
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
        if node == "failure_handler":
            # soft_wrap=False: the console soft-wraps (long lines stay whole for copying), which
            # would make the panel crop its own message.
            self._err(
                Panel(
                    Text(shown(text)),
                    title="turn failed",
                    border_style="red",
                    title_align="left",
                ),
                soft_wrap=False,
            )
        elif message.tool_calls or message.invalid_tool_calls:
            self._err(Text(shown(text), style="dim italic"))
        elif self._attempts and node in ANSWER_NODES:
            self._candidate = text  # shown once the turn ends: the last attempt's is the answer
        else:
            self.progress.stop()
            self._close_line()
            print_answer(self.out, text)

    def _close_line(self) -> None:
        """End the answer being streamed: what it held is printed, its last line ended."""
        if self._answer is not None:
            self._answer.close()
            self._answer = None


class JsonlRenderer:
    """One JSON object per line on stdout (app/service/events.py `as_json`): node, token,
    tool_call, tool_result, retry, error, notice, final. An `error` event (a bug inside a node)
    carries its traceback only with `debug` (--debug)."""

    def __init__(self, out: Console, *, debug: bool = False) -> None:
        self.out = out
        self.debug = debug
        self._partial: list[str] = []

    # Used as ConsoleRenderer is, but never with a spinner: the output is for a program.
    def __enter__(self) -> JsonlRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @overload
    def paused(self, ask: Asking) -> Asking: ...
    @overload
    def paused(self, ask: None) -> None: ...
    def paused(self, ask: Asking | None) -> Asking | None:
        return ask

    def emit(self, event: Event) -> None:
        if isinstance(event, MessageOut | StateValues | GraphChunk) or (
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


def print_messages(console: Console, messages: Sequence[BaseMessage]) -> None:
    """A stored conversation, shown the way the chat showed it."""
    for message in messages:
        if message.type == "human":
            console.print(Text("you  ", style="bold green") + Text(shown(str(message.content))))
        elif message.type == "ai":
            if str(message.content).strip():
                console.print(Text("agent ", style="bold cyan") + Text(shown(str(message.content))))
            for call in getattr(message, "tool_calls", []):
                args = json.dumps(call["args"], ensure_ascii=False)
                console.print(Text(shown(f"  → {call['name']} {args}", one_line=True), style="dim"))
        elif message.type == "tool":
            ok = getattr(message, "status", "success") != "error"
            mark = Text("  ✓ " if ok else "  ✗ ", style="green" if ok else "red")
            content = (
                for_user(message) if isinstance(message, ToolMessage) else str(message.content)
            )
            if len(content) > CARD_RESULT_CHARS:
                content = content[:CARD_RESULT_CHARS] + " …"
            line = shown(f"{message.name}: {content}")
            console.print(mark + Text(line, style="" if ok else "red"))
        else:
            console.print(Text(shown(f"{message.type}: {message.content}"), style="dim"))
