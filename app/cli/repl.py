"""The interactive chat loop: prompt-toolkit input, slash commands, Ctrl-C back to the prompt."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console, Group
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from app.cli.approval_ui import ask_approval
from app.cli.hints import command
from app.cli.place import model_notice, place_grid
from app.cli.recap import RecapTurn, print_recap, recap_turns, said
from app.cli.repl_start import glance, in_background
from app.config import Settings
from app.errors import AppError, NotFoundError, UsageError
from app.service.threads import short_id
from app.store import new_thread_id, validate_thread_id
from app.text import plural

if TYPE_CHECKING:  # the run's machinery loads in the background while the prompt is up
    from app.cli.render import ConsoleRenderer
    from app.service.runtime import Runtime
    from app.service.session import Approver, ChatSession

HELP_COMMANDS = (
    ("/help", "this help"),
    ("/history", "this thread's turns"),
    ("/threads", "all threads, numbered"),
    ("/switch ID", "continue thread ID (or number N of /threads)"),
    ("/new [NAME]", "start a new thread (named NAME)"),
    ("/undo", "roll back the last turn (and the files it wrote)"),
    ("/rewind ID", "make checkpoint ID the head again (ids: /history)"),
    ("/compact", "replace older turns with a summary now (older checkpoints keep everything)"),
    ("/exit", "leave (Ctrl-D works too)"),
)


def help_text(model: str) -> Group:
    """The REPL's /help: each command with its meaning, which wraps under itself."""
    commands = Table.grid(padding=(0, 2))
    commands.add_column(no_wrap=True)
    commands.add_column()
    for name, meaning in HELP_COMMANDS:
        commands.add_row(name, meaning)
    return Group(
        "Type a message and press Enter. Esc then Enter inserts a newline.",
        Padding(commands, (0, 0, 0, 2), expand=False),
        "Ctrl-C stops a running turn (what was shown is kept) and returns here.",
        Text(f"Model: {model}"),
    )


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
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
    prompt: PromptSession[str] = PromptSession(
        history=FileHistory(str(settings.chat_history_file)), key_bindings=_key_bindings()
    )
    settings = settings.model_copy(update={"approval": settings.approval or "ask"})
    with contextlib.ExitStack() as opened:

        def set_up() -> Repl:
            from app.service.runtime import open_runtime, settle_process

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
            settle_process()
            return repl

        quick = glance(settings, thread_id)
        if quick is None:  # the thread needs an answer first: set up before the prompt
            repl = set_up()
            repl.banner()
            repl.offer_to_finish_interrupted(prompt)
            ready = lambda: repl  # noqa: E731
        else:
            err.print(place_grid(settings), soft_wrap=False)
            print_thread(err, thread_id, quick.turns, quick.recap)
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


def print_thread(err: Console, thread_id: str, turns: int, recap: list[RecapTurn]) -> None:
    """The current thread, and its last turns when it has some."""
    resumed = f"{plural(turns, 'earlier turn')}" if turns else "new thread"
    err.print(f"thread [cyan]{escape(thread_id)}[/cyan] ({resumed})")
    if turns:
        print_recap(err, recap, total=turns)


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
        self._listed: list[str] = []  # the thread ids /threads last showed, for /switch N

    def renderer(self) -> ConsoleRenderer:
        from app.cli.render import ConsoleRenderer

        return ConsoleRenderer(self.out, self.err, show_updates=self.show_updates, debug=self.debug)

    def banner(self) -> None:
        """Where this session's data is, which model answers, and, on a thread that has a
        conversation, its last few turns."""
        self.err.print(place_grid(self.settings), soft_wrap=False)
        self._thread_header()

    def _thread_header(self, *, note_interrupted: bool = False) -> None:
        """The current thread, and its last turns when it has some."""
        values = self.session.head.load().values
        recap = recap_turns([said(m) for m in values.get("messages", [])])
        print_thread(self.err, self.session.thread_id, values.get("turn", 0), recap)
        if note_interrupted and (self.session.pending_approval() or self.session.pending_step()):
            self.err.print(
                "[yellow]its last turn was interrupted; your next message closes it (its "
                "unfinished step is discarded)[/yellow]"
            )

    def offer_to_finish_interrupted(self, prompt: PromptSession) -> None:
        """A thread whose last run was killed is never silently abandoned: resume it or discard it.
        A turn that was waiting for an approval asks for it again."""
        approver = self.approver
        if self.session.pending_approval() and approver is not None:
            self.err.print(
                f"[yellow]A turn of {self.session.thread_id} is waiting for your approval.[/yellow]"
            )
            self._guarded(
                lambda: self._with_renderer(
                    lambda r: self.session.answer_pending_approval(r, r.paused(approver))
                )
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
        if answer.startswith("r"):
            self._guarded(
                lambda: self._with_renderer(
                    lambda r: self.session.resume(r, r.paused(self.approver))
                )
            )
        else:
            self._guarded(lambda: self._with_renderer(self.session.discard))

    def handle(self, command: str, text: str) -> None:
        if not command.startswith("/"):
            self._guarded(lambda: self._turn(text))
            return
        name, _, argument = command.partition(" ")
        actions = {
            "/help": lambda: self.err.print(
                help_text(model_notice(self.settings.model_spec)), soft_wrap=False
            ),
            "/history": self._history,
            "/threads": self._threads,
            "/switch": lambda: self._switch(argument.strip()),
            "/new": lambda: self._new(argument.strip()),
            "/undo": lambda: self._rollback(turns=1, checkpoint=None),
            "/rewind": lambda: self._rollback(turns=None, checkpoint=argument.strip() or None),
            "/compact": lambda: self._with_renderer(self.session.compact),
        }
        action = actions.get(name)
        if action is None:
            self.err.print(f"unknown command {name}; type /help")
            return
        self._guarded(action)

    def _turn(self, text: str) -> None:
        with self.renderer() as renderer:
            self.session.run_turn(text, renderer, renderer.paused(self.approver))

    def _with_renderer(self, action: Callable[[ConsoleRenderer], object]) -> None:
        with self.renderer() as renderer:
            action(renderer)

    def _guarded(self, action: Callable[[], object]) -> None:
        from app.service.session import TurnInterrupted

        try:
            action()
        except TurnInterrupted as exc:
            self.err.print(f"\n[yellow]{exc}; what was shown is saved[/yellow]")
        except AppError as exc:
            self.err.print(f"[red]error:[/red] {escape(str(exc))}")

    def _history(self) -> None:
        from app.cli.tables import history_table
        from app.service import api

        found = api.history(self.runtime.database, self.session.thread_id)
        self.out.print(
            history_table(self.session.thread_id, found.turns, self.out.width), soft_wrap=False
        )

    def _threads(self) -> None:
        from app.cli.tables import threads_table
        from app.service.threads import list_threads

        threads = list_threads(self.runtime.database)
        self._listed = [t.thread_id for t in threads]
        self.out.print(threads_table(threads, self.out.width, numbered=True), soft_wrap=False)
        if threads:
            self.err.print("[dim]/switch N (or /switch ID) continues one[/dim]")

    def _switch(self, argument: str) -> None:
        """Continue another thread that exists: by id, or by its number in the last /threads."""
        if not argument:
            raise UsageError("usage: /switch THREAD_ID, or /switch N after /threads")
        database = self.runtime.database
        target = argument
        if not database.thread_exists(argument) and argument.isdigit() and self._listed:
            number = int(argument)
            if not 1 <= number <= len(self._listed):
                raise UsageError(
                    f"/threads listed {plural(len(self._listed), 'thread')}; pick 1-{len(self._listed)}"
                )
            target = self._listed[number - 1]
        if not database.thread_exists(validate_thread_id(target)):
            raise NotFoundError(
                f"thread {target} does not exist; /threads lists them, /new starts one"
            )
        self.session = self.runtime.session(target)
        self._thread_header(note_interrupted=True)

    def _new(self, name: str) -> None:
        """Start a thread: named NAME (`/new NAME`), else with a new id."""
        thread_id = validate_thread_id(name) if name else new_thread_id()
        if name and self.runtime.database.thread_exists(thread_id):
            raise UsageError(f"thread {thread_id} already exists; /switch {thread_id} continues it")
        self.session = self.runtime.session(thread_id)
        self.err.print(f"new thread [cyan]{escape(thread_id)}[/cyan]")

    def _rollback(self, *, turns: int | None, checkpoint: str | None) -> None:
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
        from app.cli.reports import head_shown, print_rollback_report

        previous = short_id(report.previous_head)
        print_rollback_report(
            self.err,
            report,
            head=head_shown(self.runtime.database, self.session.thread_id),
            undo=f"/rewind {previous}",
            replay=command(
                "replay",
                "--thread",
                report.thread_id,
                "--checkpoint",
                short_id(report.target.checkpoint_id),
            ),
        )
