"""The CLI run inside the test process, for the many cases a subprocess each would make slow: typer's
CliRunner on `app.cli.app` with the commands registered as `python -m app` has them, and the error
boundary of app/__main__.py (an AppError becomes one line and its exit status; any other exception
is an "internal error", which these tests treat as a failure)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from typer.testing import CliRunner

from app import cli
from app.errors import AppError


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    internal_error: str | None = None  # what `python -m app` would print as "internal error: …"


def invoke(*args: str, input: str | None = None) -> Outcome:
    """`python -m app ARGS` in this process, with the test's environment and working directory."""
    result = CliRunner().invoke(
        cli.app, list(args), input=input, env={"COLUMNS": "200"}, standalone_mode=False
    )
    stdout = result.stdout_bytes.decode(errors="replace")
    stderr = result.stderr_bytes.decode(errors="replace")
    error = result.exception
    if error is None:  # standalone_mode=False: typer.Exit(code) comes back as the return value
        code = result.return_value if isinstance(result.return_value, int) else 0
        return Outcome(code, stdout, stderr)
    if isinstance(error, AppError):
        return Outcome(int(error.exit_status), stdout, stderr + f"error: {error}\n")
    if isinstance(error, SystemExit):
        return Outcome(int(error.code or 0), stdout, stderr)
    text = "".join(traceback.format_exception(error))
    return Outcome(1, stdout, stderr, internal_error=text)
