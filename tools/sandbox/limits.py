"""The names and size units of the sandbox's limits, and which limit a program that ended by itself
(rather than being killed by the host) ran into."""

from __future__ import annotations

from typing import Literal

Limit = Literal["cpu", "wall", "memory", "file_size", "disk", "output", "processes"]

KIB = 1024
MIB = 1024 * KIB


def limit_from_outcome(
    exit_code: int | None, signame: str | None, cpu: float | None, cpu_limit: int, stderr: str
) -> Limit | None:
    """Which rlimit ended a program that was not killed by the host (None if it ended by itself)."""
    if exit_code == 0:
        return None
    # A SIGKILL near the CPU limit is the hard limit (soft + 1 s) for a program that ignored
    # SIGXCPU. The kernel's rusage can read up to ~20% low against the limit it enforces.
    if signame == "SIGXCPU" or (
        signame == "SIGKILL" and cpu is not None and cpu >= 0.75 * cpu_limit
    ):
        return "cpu"
    if signame == "SIGXFSZ":
        return "file_size"
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    if last.startswith("MemoryError") or "[Errno 12]" in last:
        return "memory"
    if "[Errno 27]" in last:
        return "file_size"
    if "[Errno 28]" in last:
        return "disk"
    if "[Errno 11]" in last or "can't start new thread" in last:
        return "processes"
    return None
