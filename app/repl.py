"""The interactive chat loop: prompt-toolkit input, slash commands, Ctrl-C back to the prompt."""

from __future__ import annotations

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console

from app.chat import ChatSession, TurnInterrupted, make_context, new_thread_id
from app.config import Settings
from app.errors import AppError
from app.models.offline import OFFLINE_NOTICE
from app.render import ConsoleRenderer
from app.store import open_checkpointer

HELP = """\
Type a message and press Enter. Esc then Enter inserts a newline.
  /help      this help
  /history   this thread's turns
  /threads   all threads
  /new       start a new thread
  /exit      leave (Ctrl-D works too)
Ctrl-C stops a running turn (what was shown is kept) and returns here.
Model: {model}"""


def model_notice(spec: str) -> str:
    return OFFLINE_NOTICE if spec == "offline" else f"{spec} (OpenAI-compatible endpoint)"


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event) -> None:  # type: ignore[no-untyped-def]
        event.current_buffer.insert_text("\n")

    return bindings


def run_repl(
    settings: Settings,
    thread_id: str,
    out: Console,
    err: Console,
    *,
    show_updates: bool = False,
    debug: bool = False,
) -> None:
    settings.chat_history_file.parent.mkdir(parents=True, exist_ok=True)
    prompt = PromptSession(
        history=FileHistory(str(settings.chat_history_file)), key_bindings=_key_bindings()
    )
    with open_checkpointer(settings.db, settings.busy_timeout) as saver:
        context = make_context(settings)
        session = ChatSession(settings, saver, thread_id, context)
        _banner(err, session, settings)
        while True:
            try:
                text = prompt.prompt(f"{session.thread_id}> ")
            except KeyboardInterrupt:
                continue
            except EOFError:
                return
            command = text.strip()
            if command in {"/exit", "/quit"}:
                return
            if command.startswith("/"):
                session = _slash(command, session, settings, saver, context, out, err)
                continue
            if not command:
                continue
            renderer = ConsoleRenderer(out, err, show_updates=show_updates, debug=debug)
            try:
                session.run_turn(text, renderer)
            except TurnInterrupted as exc:
                err.print(f"\n[yellow]{exc}; what was shown is saved[/yellow]")
            except AppError as exc:
                err.print(f"[red]error:[/red] {exc}")


def _banner(err: Console, session: ChatSession, settings: Settings) -> None:
    turns = session.turns()
    resumed = f"{turns} earlier turn(s)" if turns else "new thread"
    err.print(
        f"[bold]Waypoint[/bold] · thread [cyan]{session.thread_id}[/cyan] ({resumed}) · "
        f"db {settings.db}"
    )
    err.print(f"[dim]model: {model_notice(settings.model_spec)} · /help for commands[/dim]")


def _slash(
    command: str,
    session: ChatSession,
    settings: Settings,
    saver,
    context,  # type: ignore[no-untyped-def]
    out: Console,
    err: Console,
) -> ChatSession:
    from app.cli import history_table, threads_table
    from app.threads import list_threads, turn_history

    name = command.split()[0]
    if name == "/help":
        err.print(HELP.format(model=model_notice(settings.model_spec)), markup=False)
    elif name == "/history":
        try:
            out.print(
                history_table(session.thread_id, turn_history(session.graph, session.thread_id))
            )
        except AppError as exc:
            err.print(str(exc))
    elif name == "/threads":
        out.print(threads_table(list_threads(saver.conn)))
    elif name == "/new":
        session = ChatSession(settings, saver, new_thread_id(), context)
        err.print(f"new thread [cyan]{session.thread_id}[/cyan]")
    else:
        err.print(f"unknown command {name}; type /help")
    return session
