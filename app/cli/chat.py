"""`chat`: one message (-m, or piped stdin) or the interactive REPL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.io import Invocation, load_settings, run_spec
from app.cli.options import (
    ApproveOption,
    DbOption,
    MaxIterationsOption,
    MaxRetriesOption,
    MaxSecondsOption,
    MaxTokensPerTurnOption,
    MaxTrialsOption,
    ModelOption,
    StrategyOption,
    StreamStyle,
    ToolProtocolOption,
    UserOption,
    WorkspaceOption,
    chosen,
    command_group,
    examples,
)
from app.errors import AgentRunError, ExitStatus, UsageError

if TYPE_CHECKING:
    from app.config import Settings
    from app.service.approvals import Approver
    from graphs.run_settings import ApprovalPolicy

commands = command_group()


@commands.command(
    epilog=examples(
        "chat --thread demo",
        "chat --thread demo -m 'what is 6 times 7'",
        "echo 'weather in Tokyo' | waypoint chat --thread demo",
        "chat --jsonl -m 'weather in Paris and Rome, which is warmer?'",
        "chat -t trip --strategy plan -m 'weather in Rome, save it to a.txt'",
        "chat --model openai:gpt-4o-mini --approve auto",
    )
)
def chat(
    ctx: typer.Context,
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread", "-t", metavar="ID", help="Thread id; a new one is made if omitted."
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message",
            "-m",
            metavar="TEXT",
            help="Send one message and exit (stdin is read when piped).",
        ),
    ] = None,
    model: ModelOption = None,
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="Print one JSON event per line on stdout.")
    ] = False,
    max_seconds: MaxSecondsOption = None,
    max_tokens_per_turn: MaxTokensPerTurnOption = None,
    tool_protocol: ToolProtocolOption = None,
    approve: ApproveOption = None,
    user: UserOption = None,
    mcp_config: Annotated[
        Path | None,
        typer.Option(
            "--mcp-config",
            metavar="FILE",
            help="Load the tools of the MCP servers in this JSON file (env APP_MCP_CONFIG).",
        ),
    ] = None,
    stream: Annotated[
        StreamStyle,
        typer.Option(
            "--stream",
            help="tokens: the answer live and tool cards; updates: every node's output too.",
        ),
    ] = StreamStyle.tokens,
    strategy: StrategyOption = None,
    max_trials: MaxTrialsOption = None,
    max_iterations: MaxIterationsOption = None,
    max_retries: MaxRetriesOption = None,
) -> None:
    """Talk to the agent: the REPL, or one message (-m, or stdin).

    In the REPL, /help lists the slash commands."""
    io: Invocation = ctx.obj
    from app.store import new_thread_id, validate_thread_id

    if thread is not None:  # `--thread ''` is an invalid id, not "make a new thread"
        validate_thread_id(thread)
    environment = load_settings(
        strategy=chosen(strategy),
        db=db,
        workspace=workspace,
        tool_protocol=chosen(tool_protocol),
        mcp_config=mcp_config,
    )
    settings = environment.with_run(
        run_spec(
            model=model,
            user=user,
            approval=approve,
            max_iterations=max_iterations,
            max_retries=max_retries,
            max_seconds=max_seconds,
            max_tokens_per_turn=max_tokens_per_turn,
            max_trials=max_trials,
        )
    )
    thread_id = new_thread_id() if thread is None else thread
    source = "give -m some text"
    if message is None and not sys.stdin.isatty():
        # The newline that ends piped text is not part of the message (nor of the thread title).
        message = sys.stdin.buffer.read().decode("utf-8", "replace").rstrip()
        source = "the text piped in was empty"
    if message is not None and not message.strip():
        raise UsageError(f"the message is empty, so nothing was sent ({source})")
    if message is not None:
        code = _one_shot(io, settings, thread_id, message, jsonl, stream, created=thread is None)
        raise typer.Exit(code)
    from app.cli.repl import run_repl

    run_repl(
        settings,
        thread_id,
        io.out,
        io.err,
        show_updates=stream is StreamStyle.updates,
        debug=io.debug,
    )


def _one_shot(
    io: Invocation,
    settings: Settings,
    thread_id: str,
    message: str,
    jsonl: bool,
    stream: StreamStyle,
    *,
    created: bool,
) -> int:
    from app.cli.render import ConsoleRenderer, JsonlRenderer
    from app.service.events import Notice
    from app.service.outcome import is_success, unanswered_reason
    from app.service.runtime import open_runtime
    from app.service.session import TurnInterrupted

    renderer = (
        JsonlRenderer(io.out, debug=io.debug)
        if jsonl
        else ConsoleRenderer(
            io.out, io.err, show_updates=stream is StreamStyle.updates, debug=io.debug
        )
    )
    policy, approver = _approval_for_one_shot(
        io, settings, interactive=sys.stdin.isatty() and not jsonl
    )
    with open_runtime(settings, approval=policy) as runtime:
        session = runtime.session(thread_id)
        if created and not jsonl:
            io.err.print(f"[dim]thread {thread_id}[/dim]")
        if approver is None:
            renderer.emit(Notice(f"approval policy: {policy} ({POLICY_MEANING[policy]})"))
        try:
            with renderer:
                result = session.run_turn(message, renderer, renderer.paused(approver))
        except TurnInterrupted as exc:
            io.err.print(f"[yellow]{exc}; what was shown is saved[/yellow]")
            return ExitStatus.INTERRUPTED
        io.answer_kept()  # written and saved: a Ctrl-C from here on is ignored (exit 0)
    if result.status != "interrupted" and not is_success(result.status):
        # Failed (retries used up, an action not done) or stopped (a budget, the step limit, a
        # loop): not answered, so not a success (app/service/outcome.py).
        reason = unanswered_reason(result.status)
        raise AgentRunError(f"turn {result.turn} of thread {thread_id} {reason}")
    return ExitStatus.OK


POLICY_MEANING = {
    "auto": "risky tool calls run without asking",
    "never": "risky tool calls are refused; pass --approve auto to allow them",
    "ask": "risky tool calls are shown for approval",
}


def _approval_for_one_shot(
    io: Invocation, settings: Settings, *, interactive: bool
) -> tuple[ApprovalPolicy, Approver | None]:
    """The explicit policy of a one-shot turn, and who answers when it is `ask` (a terminal)."""
    from app.cli.approval_ui import ask_approval

    policy: ApprovalPolicy = settings.approval or ("ask" if interactive else "never")
    if policy == "ask" and not interactive:
        policy = "never"
    if policy != "ask":
        return policy, None
    return policy, lambda calls: ask_approval(calls, lambda q, d: _read_line(io, q, d), io.err)


def _read_line(io: Invocation, question: str, default: str) -> str:
    io.err.print(question + (f"[{default}] " if default else ""), end="", markup=False)
    return input().strip() or default
