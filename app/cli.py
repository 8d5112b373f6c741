"""Typer commands. Thin: parse → Settings → service call → render → exit code."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from app.errors import AgentRunError, ExitStatus

if TYPE_CHECKING:
    from app.config import Settings

app = typer.Typer(
    help="Waypoint: a LangGraph agent for the terminal whose every step is a durable checkpoint.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
threads_app = typer.Typer(help="Inspect the threads stored in the database.", no_args_is_help=True)
app.add_typer(threads_app, name="threads")


class InvocationConsole:
    """The rich Console of the running invocation, under a name that commands import once.

    rich reads COLUMNS, NO_COLOR and whether its stream is a terminal when a Console is made, so every
    run of the CLI gets a new one (`start_invocation`), made on first use like a module-level one."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            self._console = Console(stderr=self._stderr, soft_wrap=True)
        return self._console

    def renew(self) -> None:
        self._console = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)


out: Console = InvocationConsole(stderr=False)  # type: ignore[assignment]
err: Console = InvocationConsole(stderr=True)  # type: ignore[assignment]
state = {"debug": False}


def start_invocation() -> None:
    """Forget what an earlier invocation in this process set: its consoles and --debug."""
    out.renew()  # type: ignore[attr-defined]
    err.renew()  # type: ignore[attr-defined]
    state["debug"] = False


def load_settings(**overrides: object) -> Settings:
    """Settings for a command; pydantic-settings is imported only when a command runs, which keeps
    `--help` fast."""
    from app.config import load_settings as load

    return load(**overrides)


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="SQLite file or postgresql://user@host:5432/dbname URL (env APP_DB)."
    ),
]
ThreadOption = Annotated[str, typer.Option("--thread", "-t", help="Thread id, e.g. demo.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class StreamStyle(StrEnum):
    tokens = "tokens"
    updates = "updates"


@app.callback()
def main_options(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of internal errors.")
    ] = False,
) -> None:
    state["debug"] = debug


@app.command()
def chat(
    thread: Annotated[
        str | None, typer.Option("--thread", "-t", help="Thread id; a new one is made if omitted.")
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message", "-m", help="Send one message and exit (stdin is used when piped)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="offline | openai:<name> (env APP_MODEL).")
    ] = None,
    db: DbOption = None,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Directory the file tools may use (env APP_WORKSPACE)."),
    ] = None,
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="Print one JSON event per line on stdout.")
    ] = False,
    max_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-seconds",
            min=0.1,
            help="Wall-time budget per turn, model requests and retry waits included "
            "(env APP_MAX_SECONDS).",
        ),
    ] = None,
    max_tokens_per_turn: Annotated[
        int | None,
        typer.Option(
            "--max-tokens-per-turn",
            min=1,
            help="Model-token budget per turn, where the endpoint reports usage.",
        ),
    ] = None,
    tool_protocol: Annotated[
        str | None,
        typer.Option(
            "--tool-protocol",
            help="native (tool calling) | react (Thought/Action text) (env APP_TOOL_PROTOCOL).",
        ),
    ] = None,
    approve: Annotated[
        str | None,
        typer.Option(
            "--approve",
            help="Risky tool calls: ask | auto | never (default: ask in the "
            "REPL or on a terminal, never when piped) (env APP_APPROVE).",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user", help="Whose long-term memory to use (default: the OS user; env APP_USER)."
        ),
    ] = None,
    mcp_config: Annotated[
        Path | None,
        typer.Option(
            "--mcp-config",
            help="Load the tools of the MCP servers in this JSON file (env APP_MCP_CONFIG).",
        ),
    ] = None,
    stream: Annotated[
        StreamStyle,
        typer.Option(
            "--stream", help="tokens: live answer and tool cards; updates: every node's output."
        ),
    ] = StreamStyle.tokens,
    strategy: Annotated[
        str | None,
        typer.Option(
            "--strategy",
            help="react | plan | reflexion | routed (env APP_STRATEGY); default: the thread's "
            "own, react for a new thread. See `graph --strategy S`.",
        ),
    ] = None,
    max_trials: Annotated[
        int | None,
        typer.Option(
            "--max-trials", min=1, max=10, help="reflexion: attempts per turn (env APP_MAX_TRIALS)."
        ),
    ] = None,
) -> None:
    """Talk to the agent: an interactive REPL, or one message with -m / piped stdin."""
    from app.chat import new_thread_id
    from app.store import validate_thread_id

    if thread is not None:  # `--thread ''` is an invalid id, not "make a new thread"
        validate_thread_id(thread)
    settings = load_settings(
        strategy=strategy,
        max_trials=max_trials,
        model=model,
        db=db,
        workspace=workspace,
        max_seconds=max_seconds,
        max_tokens_per_turn=max_tokens_per_turn,
        tool_protocol=tool_protocol,
        approve=approve,
        user=user,
        mcp_config=mcp_config,
    )
    thread_id = new_thread_id() if thread is None else thread
    if message is None and not sys.stdin.isatty():
        # The newline that ends piped text is not part of the message (nor of the thread title).
        message = sys.stdin.buffer.read().decode("utf-8", "replace").rstrip()
    if message is not None:
        code = _one_shot(settings, thread_id, message, jsonl, stream, created=thread is None)
        raise typer.Exit(code)
    from app.repl import run_repl

    run_repl(
        settings,
        thread_id,
        out,
        err,
        show_updates=stream is StreamStyle.updates,
        debug=state["debug"],
    )


def _one_shot(
    settings: Settings,
    thread_id: str,
    message: str,
    jsonl: bool,
    stream: StreamStyle,
    *,
    created: bool,
) -> int:
    from app.chat import TurnInterrupted
    from app.render import ConsoleRenderer, JsonlRenderer
    from app.runtime import open_runtime

    renderer = (
        JsonlRenderer(out, debug=state["debug"])
        if jsonl
        else ConsoleRenderer(
            out, err, show_updates=stream is StreamStyle.updates, debug=state["debug"]
        )
    )
    policy, approver = _approval_for_one_shot(
        settings, interactive=sys.stdin.isatty() and not jsonl
    )
    with open_runtime(settings, approval=policy) as runtime:
        session = runtime.session(thread_id)
        if created and not jsonl:
            err.print(f"[dim]thread {thread_id}[/dim]")
        if approver is None:
            renderer.notice(f"approval policy: {policy} ({POLICY_MEANING[policy]})")
        try:
            result = session.run_turn(message, renderer, approver)
        except TurnInterrupted as exc:
            err.print(f"[yellow]{exc}; what was shown is saved[/yellow]")
            return ExitStatus.INTERRUPTED
    if result.status == "failed":
        raise AgentRunError(f"turn {result.turn} of thread {thread_id} failed")
    return ExitStatus.OK


POLICY_MEANING = {
    "auto": "risky tool calls run without asking",
    "never": "risky tool calls are refused; pass --approve auto to allow them",
    "ask": "risky tool calls are shown for approval",
}


def _approval_for_one_shot(settings: Settings, *, interactive: bool):  # type: ignore[no-untyped-def]
    """The explicit policy of a one-shot turn, and who answers when it is `ask` (a terminal)."""
    from app.approval_ui import ask_approval

    policy = settings.approve or ("ask" if interactive else "never")
    if policy == "ask" and not interactive:
        policy = "never"
    if policy != "ask":
        return policy, None
    return policy, lambda calls: ask_approval(calls, _read_line, err)


def _read_line(question: str, default: str) -> str:
    err.print(question + (f"[{default}] " if default else ""), end="", markup=False)
    return input().strip() or default


@app.command("graph")
def draw_graph(
    strategy: Annotated[
        str, typer.Option("--strategy", help="react | plan | reflexion | routed.")
    ] = "react",
) -> None:
    """Print a strategy's state machine as a Mermaid diagram (its tool-loop subgraph too)."""
    from app.errors import UsageError
    from graphs.strategies import UnknownStrategyError, mermaid

    try:
        out.print(mermaid(strategy), markup=False, highlight=False)
    except UnknownStrategyError as exc:
        raise UsageError(str(exc)) from None


@threads_app.command("list")
def threads_list(db: DbOption = None, as_json: JsonOption = False) -> None:
    """List threads, newest first: id, title, turns, checkpoints, size, last update, interrupted."""
    from app.db import open_database
    from app.render_time import threads_table
    from app.threads import list_threads

    settings = load_settings(db=db)
    with open_database(settings.database, settings.busy_timeout) as database:
        threads = list_threads(database)
    if as_json:
        out.print_json(json.dumps([t.as_dict() for t in threads], ensure_ascii=False))
        return
    out.print(threads_table(threads))


@app.command()
def doctor(
    ping: Annotated[
        bool,
        typer.Option(
            "--ping", help="Send a tiny request to the model, and a tool-call round trip."
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="offline | openai:<name> (env APP_MODEL).")
    ] = None,
    tool_protocol: Annotated[
        str | None,
        typer.Option("--tool-protocol", help="native | react (env APP_TOOL_PROTOCOL)."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Print the resolved configuration (secrets masked) and check the database and workspace."""
    from app import doctor as checks

    settings = load_settings(db=db, model=model, tool_protocol=tool_protocol)
    table = Table("setting", "value", title="Waypoint configuration")
    for name, value in checks.configuration(settings):
        table.add_row(name, value)
    out.print(table)
    results = [checks.check_database(settings), checks.check_workspace(settings)]
    if ping:
        results += [
            checks.ping(settings),
            checks.probe_tools(settings),
            checks.check_window(settings),
        ]
    for check in results:
        mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
        out.print(f"{mark}  {check.name}: {escape(check.detail)}")
    if not all(check.ok for check in results):
        raise typer.Exit(1)


@app.command("tools")
def list_tools(
    as_json: JsonOption = False,
    mcp_config: Annotated[
        Path | None, typer.Option("--mcp-config", help="Include the tools of these MCP servers.")
    ] = None,
    db: DbOption = None,
) -> None:
    """List every tool the agent can call, with its description and JSON schema."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from app.runtime import open_runtime
    from graphs.shared.approvals import risk_of

    settings = load_settings(db=db, mcp_config=mcp_config, model="offline")
    with open_runtime(settings) as runtime:
        described = [
            {
                **convert_to_openai_tool(tool)["function"],
                "needs_approval": "sometimes"
                if (tool.metadata or {}).get("risk") or risk_of(tool, {})
                else "no",
            }
            for tool in runtime.context.tools
        ]
    if as_json:
        out.print_json(json.dumps(described, ensure_ascii=False))
        return
    table = Table("tool", "description", "arguments", "approval")
    for tool in described:
        arguments = ", ".join(tool.get("parameters", {}).get("properties", {})) or "-"
        table.add_row(
            tool["name"], tool["description"].split("\n")[0], arguments, tool["needs_approval"]
        )
    out.print(table)


# Commands defined in their own modules register themselves on `app` when imported.
from app import cli_corpus, cli_mcp, cli_memory, cli_serve, cli_store, cli_time  # noqa: E402, F401
