"""Entry point: `python -m app` and the `waypoint` console script; the one error boundary."""

from __future__ import annotations

import os
import sys

import click


def main() -> None:
    from app.cli import app, err, state
    from app.errors import AppError, ExitStatus

    try:
        code = app(standalone_mode=False)
    except AppError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        code = exc.exit_status
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        err.print("[yellow]interrupted[/yellow]")
        code = ExitStatus.INTERRUPTED
    except Exception as exc:
        if state["debug"]:
            raise
        err.print(f"[red]internal error:[/red] {type(exc).__name__}: {exc} (run with --debug)")
        code = ExitStatus.RUN_FAILED
    if code == ExitStatus.INTERRUPTED:
        # A tool thread may still be blocked in C code; the thread is already consistent on disk,
        # so leave now instead of waiting for it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    sys.exit(int(code or 0))


if __name__ == "__main__":
    main()
