"""serve's RSS over N runs on one thread, read every 100 runs, with where the resident memory is
(/proc/PID/smaps: the main heap, glibc's thread arenas, other anonymous maps).
Usage: python docs/notes/servemem_measure.py N [THREADS] [--label L]; extra env (MALLOC_ARENA_MAX...)
passes through to the server."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench import serve_memory
from bench.serve_memory import rss_mib, serve_process

ARENA_RESERVE_KIB = 64 * 1024  # a glibc thread arena reserves 64 MiB of address space


def smaps_summary(pid: int) -> dict[str, float]:
    """Resident MiB by kind of mapping."""
    kinds: dict[str, float] = {}
    start = 0
    name = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = re.match(r"^([0-9a-f]+)-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
        if head:
            start, name = int(head.group(1), 16), head.group(2)
            continue
        if line.startswith("Rss:"):
            if name == "[heap]":
                kind = "main heap"
            elif name:
                kind = "files+stack"
            elif start % (ARENA_RESERVE_KIB * 1024) == 0:
                kind = "thread arenas"
            else:
                kind = "other anon (pymalloc, mmapped blocks)"
            kinds[kind] = kinds.get(kind, 0.0) + int(line.split()[1]) / 1024
    return {k: round(v, 1) for k, v in sorted(kinds.items())}


def hooked_env() -> dict[str, str]:
    """The server's environment with SERVEMEM_HOOK (a directory with a sitecustomize.py) first on
    its path: a hook that dumps the allocators' statistics on SIGUSR1."""
    env = CLEAN_ENV()
    if os.environ.get("SERVEMEM_HOOK"):
        env["PYTHONPATH"] = os.environ["SERVEMEM_HOOK"] + os.pathsep + env["PYTHONPATH"]
    return env


CLEAN_ENV = serve_memory.clean_env
serve_memory.clean_env = hooked_env


def dump(pid: int) -> None:
    """Ask the hook for a dump and wait for it (bounded)."""
    if not os.environ.get("SERVEMEM_DUMP"):
        return
    before = len(list(Path(os.environ["SERVEMEM_DUMP"]).parent.glob("*.gc")))
    os.kill(pid, signal.SIGUSR1)
    for _ in range(200):
        if len(list(Path(os.environ["SERVEMEM_DUMP"]).parent.glob("*.gc"))) > before:
            return
        time.sleep(0.05)


def main() -> None:
    runs = int(sys.argv[1])
    threads = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else 1
    label = sys.argv[sys.argv.index("--label") + 1] if "--label" in sys.argv else ""
    readings: dict[int, float] = {}
    maps: dict[int, dict[str, float]] = {}
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_process(Path(tmp)) as (process, base),
        httpx.Client(base_url=base, timeout=120) as client,
    ):
        for n in range(runs):
            body = {
                "assistant_id": "waypoint",
                "input": {"messages": [{"role": "user", "content": f"what is {n} plus 1"}]},
                "if_not_exists": "create",
            }
            client.post(f"/threads/t{n % threads}/runs/wait", json=body).raise_for_status()
            if (n + 1) % 100 == 0:
                readings[n + 1] = round(rss_mib(process.pid), 1)
            if n + 1 in (100, runs):
                maps[n + 1] = smaps_summary(process.pid)
                dump(process.pid)
    early, end = readings[min(100, runs)], readings[runs]
    print(
        json.dumps(
            {
                "label": label,
                "ratio": round(end / early, 3),
                "early": early,
                "end": end,
                "seconds": round(time.perf_counter() - started),
                "readings": readings,
                "maps": maps,
            }
        )
    )


if __name__ == "__main__":
    main()
