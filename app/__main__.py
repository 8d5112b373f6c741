"""Entry point: `python -m app` and the `waypoint` console script; the one error boundary.

Nothing is imported at module level: importing the CLI takes most of a second, and a Ctrl-C during it
must land inside the boundary (exit 130, one line), not print a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typer import Typer
    from typer._click import Command

INTERRUPTED = 130  # ExitStatus.INTERRUPTED, usable before app.errors is imported


def main() -> None:
    try:
        code = run(sys.argv[1:], leaving=True)
    except KeyboardInterrupt:  # a second Ctrl-C while the first one was being reported
        code = INTERRUPTED
    leave(code)


def run(argv: list[str], prog_name: str | None = None, *, leaving: bool = False) -> int:
    """Run the CLI on `argv` and return its exit status: every error, Ctrl-C included, becomes a
    message on stderr and a status here. It never exits the process, so tests call it in-process.
    `leaving`: the process exits right after, so a Ctrl-C a finished turn ignores stays ignored
    until then (its status is the turn's, see `Invocation.answer_kept`)."""
    try:
        return _run(argv, prog_name, leaving)
    except KeyboardInterrupt:  # while the CLI was being imported, or an error was being reported
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
        return INTERRUPTED


def _run(argv: list[str], prog_name: str | None, leaving: bool) -> int:
    import typer
    from rich.markup import escape
    from typer._click import exceptions as typer_click  # typer (>= 0.29) vendors its own click
    from typer._click.utils import PacifyFlushWrapper, _detect_program_name
    from typer.main import get_command

    from app.cli.io import Invocation
    from app.cli.main import app
    from app.errors import AppError, ExitStatus

    invocation = Invocation()  # this run's consoles and --debug, handed to every command
    err = invocation.err
    command = _command(app, get_command)
    try:
        # Not `app(...)`: typer turns a KeyboardInterrupt into a silent exit 130.
        prog = prog_name or _detect_program_name()
        with command.make_context(prog, list(argv), obj=invocation) as context:
            code = command.invoke(context)
    except AppError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        code = exc.exit_status
    except typer.Exit as exc:
        code = exc.exit_code
    except typer_click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except (typer.Abort, EOFError, KeyboardInterrupt) as exc:
        if isinstance(exc, EOFError):  # input() at end of stdin; click prints the same newline
            err.print()
        err.print("[yellow]interrupted[/yellow]")
        code = ExitStatus.INTERRUPTED
    except BrokenPipeError:  # the reader of stdout left (`| head`): stop quietly, as click does
        sys.stdout = PacifyFlushWrapper(sys.stdout)
        sys.stderr = PacifyFlushWrapper(sys.stderr)
        code = ExitStatus.RUN_FAILED
    except Exception as exc:
        if invocation.debug:
            raise
        err.print(
            f"[red]internal error:[/red] {type(exc).__name__}: {escape(str(exc))} (run with --debug)"
        )
        code = ExitStatus.RUN_FAILED
    finally:
        if not leaving:
            invocation.restore_sigint()
    return int(code or 0)


_COMMANDS: dict[int, Command] = {}


def _command(app: Typer, get_command: Callable[[Typer], Command]) -> Command:
    """The click command typer builds from `app`, once per process: building it reads the type
    hints of every command's parameters (~12 ms), and a process may run many commands (the soak's
    workers, the tests)."""
    if id(app) not in _COMMANDS:
        _COMMANDS[id(app)] = get_command(app)
    return _COMMANDS[id(app)]


def leave(code: int) -> None:
    """Exit the process with `code`; a Ctrl-C now has nothing left to interrupt and is ignored.

    After a Ctrl-C, or with a tool thread still running (abandoned by a Ctrl-C in the REPL), it exits
    at once: the interpreter would join that thread, which may be blocked in C code (the thread's
    state on disk is already consistent), and under `python -m` CPython ends the process by SIGINT
    instead of 130 when the KeyboardInterrupt had ended a string exec()/eval() (the code dataclasses
    and namedtuples generate while modules import), even though it was handled."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # before anything else a Ctrl-C could land in
    import contextlib
    import os
    import threading

    running = any(t is not threading.main_thread() and t.is_alive() for t in threading.enumerate())
    if code == INTERRUPTED or running:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # the reader left, or it is closed
                stream.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
