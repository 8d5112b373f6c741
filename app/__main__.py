"""Entry point: `python -m app` and the `waypoint` console script; the one error boundary."""

from __future__ import annotations

import os
import sys
import threading

import typer
from rich.markup import escape
from typer._click import exceptions as typer_click  # typer (>= 0.29) vendors its own click


def main() -> None:
    from app.cli import app, err, state
    from app.errors import AppError, ExitStatus

    try:
        code = app(standalone_mode=False)
    except AppError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        code = exc.exit_status
    except typer.Exit as exc:
        code = exc.exit_code
    except typer_click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        err.print("[yellow]interrupted[/yellow]")
        code = ExitStatus.INTERRUPTED
    except Exception as exc:
        if state["debug"]:
            raise
        err.print(
            f"[red]internal error:[/red] {type(exc).__name__}: {escape(str(exc))} (run with --debug)"
        )
        code = ExitStatus.RUN_FAILED
    leave(int(code or 0))


def leave(code: int) -> None:
    """Exit without waiting for a tool thread abandoned by Ctrl-C (the interpreter would join it at
    exit, and it may be blocked in C code); the thread's state on disk is already consistent."""
    if any(t is not threading.main_thread() and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
