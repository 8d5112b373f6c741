"""The interactive chat loop: prompt-toolkit input, slash commands, Ctrl-C back to the prompt."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console

from app.cli.approval_ui import ask_approval
from app.cli.repl_start import glance, in_background
from app.config import Settings
from app.errors import AppError, UsageError
from app.models.notice import OFFLINE_NOTICE

if TYPE_CHECKING:  # the run's machinery loads in the background while the prompt is up
    from app.cli.render import ConsoleRenderer
    from app.service.runtime import Runtime
    from app.service.session import Approver, ChatSession

HELP = """\
Type a message and press Enter. Esc then Enter inserts a newline.
  /help      this help
  /history   this thread's turns
  /threads   all threads
  /new       start a new thread
  /undo      roll back the last turn (and the files it wrote)
  /rewind ID make checkpoint ID the head again (ids: /history, or `history --all`)
  /compact   replace older turns with a summary now (older checkpoints keep everything)
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
    settings = settings.model_copy(update={"approve": settings.approve or "ask"})
    with contextlib.ExitStack() as opened:

        def set_up() -> Repl:
            from app.service.runtime import open_runtime

            runtime = opened.enter_context(open_runtime(settings))
            repl = Repl(
                runtime,
                runtime.session(thread_id),
                out,
                err,
                show_updates=show_updates,
                debug=debug,
            )
            repl.approver = lambda calls: ask_approval(
                calls, lambda question, default: prompt.prompt(question, default=default), err
            )
            return repl

        quick = glance(settings, thread_id)
        if quick is None:  # the thread needs an answer first: set up before the prompt
            repl = set_up()
            repl.banner()
            repl.offer_to_finish_interrupted(prompt)
            ready = lambda: repl  # noqa: E731
        else:
            print_banner(err, thread_id, quick.turns, settings)
            ready = in_background(set_up)
        try:
            _loop(prompt, ready, thread_id)
        finally:
            ready()  # what the set-up opens is closed only once it has finished


def _loop(prompt: PromptSession, ready: Callable[[], Repl], thread_id: str) -> None:
    while True:
        try:
            text = prompt.prompt(f"{thread_id}> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            return
        command = text.strip()
        if command in {"/exit", "/quit"}:
            return
        if command:
            repl = ready()
            repl.handle(command, text)
            thread_id = repl.session.thread_id


def print_banner(err: Console, thread_id: str, turns: int, settings: Settings) -> None:
    resumed = f"{turns} earlier turn(s)" if turns else "new thread"
    err.print(
        f"[bold]Waypoint[/bold] · thread [cyan]{thread_id}[/cyan] ({resumed}) · "
        f"db {settings.database.label}"
    )
    err.print(f"[dim]model: {model_notice(settings.model_spec)} · /help for commands[/dim]")


class Repl:
    """One interactive session: the current thread, and what each line typed at the prompt does."""

    def __init__(
        self,
        runtime: Runtime,
        session: ChatSession,
        out: Console,
        err: Console,
        *,
        show_updates: bool,
        debug: bool,
    ) -> None:
        self.runtime, self.session = runtime, session
        self.settings = runtime.settings
        self.out, self.err = out, err
        self.show_updates, self.debug = show_updates, debug
        self.approver: Approver | None = None

    def renderer(self) -> ConsoleRenderer:
        from app.cli.render import ConsoleRenderer

        return ConsoleRenderer(self.out, self.err, show_updates=self.show_updates, debug=self.debug)

    def banner(self) -> None:
        print_banner(self.err, self.session.thread_id, self.session.turns(), self.settings)

    def offer_to_finish_interrupted(self, prompt: PromptSession) -> None:
        """A thread whose last run was killed is never silently abandoned: resume it or discard it.
        A turn that was waiting for an approval asks for it again."""
        if self.session.pending_approval() and self.approver is not None:
            self.err.print(
                f"[yellow]A turn of {self.session.thread_id} is waiting for your approval.[/yellow]"
            )
            self._guarded(
                lambda: self.session.answer_pending_approval(self.renderer(), self.approver)
            )
            return
        pending = self.session.pending_step()
        if pending is None:
            return
        self.err.print(
            f"[yellow]The last turn of {self.session.thread_id} was interrupted "
            f"({pending}).[/yellow]"
        )
        answer = prompt.prompt("[r]esume it or [d]iscard the unfinished step? ").strip().lower()
        self._guarded(
            lambda: (
                self.session.resume(self.renderer())
                if answer.startswith("r")
                else self.session.discard(self.renderer())
            )
        )

    def handle(self, command: str, text: str) -> None:
        if not command.startswith("/"):
            self._guarded(lambda: self.session.run_turn(text, self.renderer(), self.approver))
            return
        name, _, argument = command.partition(" ")
        actions = {
            "/help": lambda: self.err.print(
                HELP.format(model=model_notice(self.settings.model_spec)), markup=False
            ),
            "/history": self._history,
            "/threads": self._threads,
            "/new": self._new,
            "/undo": lambda: self._rollback(turns=1, checkpoint=None),
            "/rewind": lambda: self._rollback(turns=None, checkpoint=argument.strip() or None),
            "/compact": lambda: self.session.compact(self.renderer()),
        }
        action = actions.get(name)
        if action is None:
            self.err.print(f"unknown command {name}; type /help")
            return
        self._guarded(action)

    def _guarded(self, action) -> None:  # type: ignore[no-untyped-def]
        from app.service.session import TurnInterrupted

        try:
            action()
        except TurnInterrupted as exc:
            self.err.print(f"\n[yellow]{exc}; what was shown is saved[/yellow]")
        except AppError as exc:
            self.err.print(f"[red]error:[/red] {exc}")

    def _history(self) -> None:
        from app.cli.tables import history_table
        from app.service import api

        found = api.history(self.runtime.database, self.session.thread_id)
        self.out.print(history_table(self.session.thread_id, found.turns))

    def _threads(self) -> None:
        from app.cli.tables import threads_table
        from app.service.threads import list_threads

        self.out.print(threads_table(list_threads(self.runtime.database)))

    def _new(self) -> None:
        from app.store import new_thread_id

        self.session = self.runtime.session(new_thread_id())
        self.err.print(f"new thread [cyan]{self.session.thread_id}[/cyan]")

    def _rollback(self, *, turns: int | None, checkpoint: str | None) -> None:
        from app.cli.reports import print_rollback
        from app.service import api

        if turns is None and checkpoint is None:
            raise UsageError("usage: /rewind CHECKPOINT_ID (ids are in /history)")
        report = api.rollback(
            self.runtime.database,
            self.session.thread_id,
            turns=turns,
            checkpoint=checkpoint,
            workspace=self.settings.workspace,
        )
        print_rollback(self.err, report)
