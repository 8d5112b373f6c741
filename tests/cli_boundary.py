"""`python -m app` in the test process with text output, for tests that check what a command says:
`run_cli` (the real entry point and error boundary, app.__main__.run) with stdout and stderr
decoded, and the "internal error" line, which these tests treat as a failure, picked out."""

from __future__ import annotations

from dataclasses import dataclass

from tests.conftest import run_cli


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    internal_error: str | None = None  # what `python -m app` printed as "internal error: …"


def invoke(*args: str, input: str | None = None) -> Outcome:
    """`python -m app ARGS` in this process, with the test's environment and working directory."""
    done = run_cli(*args, input=input.encode() if input is not None else None)
    stdout = done.stdout.decode(errors="replace")
    stderr = done.stderr.decode(errors="replace")
    internal = next((line for line in stderr.splitlines() if "internal error:" in line), None)
    return Outcome(done.returncode, stdout, stderr, internal)
