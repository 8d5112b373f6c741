"""How a sandboxed program ended (RunResult), the error for a sandbox that never started it
(SandboxSetupError), and reading both from what PID 1 and the program's pipes reported."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from tools.errors import ToolError
from tools.sandbox.limits import Limit, limit_from_outcome
from tools.sandbox.process import Stream


@dataclass(frozen=True)
class RunResult:
    """How a sandboxed program ended: exit code or signal name, its (capped) output, the wall time
    in seconds, the limit that stopped it, if any, and the most memory its cgroup held at once
    (None without a cgroup)."""

    exit_code: int | None
    signal: str | None
    stdout: str
    stderr: str
    duration: float
    limit_hit: Limit | None
    cpu_seconds: float | None = None
    memory_peak_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.limit_hit is None


class SandboxSetupError(Exception):
    """The sandbox could not be built, so the code was not started."""


def read_outcome(
    streams: dict[str, Stream],
    killed_for: Limit | None,
    duration: float,
    *,
    cpu_limit: int,
    wall_seconds: float,
    tree_limit: Limit | None = None,
) -> tuple[RunResult, int | None]:
    """The program's result and the host uid the sandbox ran as, from PID 1's status report (the
    ``status`` stream), the program's output, the host's reason for killing it and the limit its
    cgroup reported hit (``tree_limit``: a process of the tree killed for memory, a fork refused).

    Raises SandboxSetupError when the program never started, ToolError when PID 1 died unreported.
    """
    status = _parse_status(streams["status"].text())
    if "ready" not in status:
        if killed_for == "wall":
            raise SandboxSetupError(f"the sandbox did not start within {wall_seconds:g} s")
        diagnostics = tail(streams["diagnostics"].text()) or "no diagnostics"
        raise SandboxSetupError(f"the sandbox could not be set up ({diagnostics})")
    if "execfail" in status:
        raise SandboxSetupError(
            f"the sandboxed interpreter could not be started ({status['execfail']})"
        )
    exit_code: int | None = None
    signame: str | None = None
    cpu: float | None = None
    host_uid: int | None = None
    if "done" in status:
        code_text, cpu_text, uid_text = status["done"].split()
        code, cpu, host_uid = int(code_text), float(cpu_text), int(uid_text)
        if code < 0:
            signame = _signal_name(-code)
        else:
            exit_code = code
    elif killed_for is not None or tree_limit is not None:
        signame = "SIGKILL"
    else:
        raise ToolError(
            "the sandbox supervisor died unexpectedly; the program's outcome is unknown"
        )
    stderr = streams["stderr"].text(truncated_marker=True)
    limit = (
        killed_for or tree_limit or limit_from_outcome(exit_code, signame, cpu, cpu_limit, stderr)
    )
    result = RunResult(
        exit_code=exit_code,
        signal=signame,
        stdout=streams["stdout"].text(truncated_marker=True),
        stderr=stderr,
        duration=duration,
        limit_hit=limit,
        cpu_seconds=cpu,
    )
    return result, host_uid


def tail(text: str, lines: int = 3) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _parse_status(text: str) -> dict[str, str]:
    status: dict[str, str] = {}
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        status.setdefault(word, rest)
    return status


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
