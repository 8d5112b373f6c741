"""Worker processes that start together: each is spawned and set up first (it prints `ready`), then
all are released at once (a line on their stdin), and each prints a JSON report as its last line
(`release`); or released round after round (`run_round`: a number of turns on their stdin, a JSON
report line from each), then let go (`finish`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def start_workers(
    commands: list[list[str]], cwd: Path, env: dict[str, str]
) -> list[subprocess.Popen]:
    """Spawn every command and wait until each has said `ready`."""
    workers = [
        subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for command in commands
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stderr is not None
        if worker.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"a worker did not start: {worker.stderr.read()[-2000:]!r}")
    return workers


def release(workers: list[subprocess.Popen], timeout: float = 1800) -> list[dict]:
    """Let every worker go at once; their reports, in order."""
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
        worker.stdin.flush()
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=timeout)
        if worker.returncode != 0:
            raise RuntimeError(f"a worker failed: {err.decode()[-2000:]}")
        reports.append(json.loads(out.decode().splitlines()[-1]))
    return reports


def run_round(workers: list[subprocess.Popen], turns: int) -> list[dict]:
    """Let every worker run `turns` more turns at once; their reports of the round, in order."""
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(f"{turns}\n".encode())
        worker.stdin.flush()
    reports = []
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        if not line:
            _, err = worker.communicate()
            raise RuntimeError(f"a worker failed: {err.decode()[-2000:]}")
        reports.append(json.loads(line))
    return reports


def finish(workers: list[subprocess.Popen], timeout: float = 60) -> None:
    """Wait for workers that ran all their turns to exit."""
    for worker in workers:
        _, err = worker.communicate(timeout=timeout)
        if worker.returncode != 0:
            raise RuntimeError(f"a worker failed: {err.decode()[-2000:]}")
