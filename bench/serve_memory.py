"""The memory of `serve` as its runs accumulate (`--serve-runs N`): one server process answers N
`runs/wait` one after the other, on one thread and then (a fresh server) spread over N/10 threads;
its resident memory after 100 runs and after N. A server that kept its finished runs grew with them."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.report import Figure
from bench.workloads import clean_env

EARLY = 100  # runs after which the first reading is taken (the server is warm by then)
RUNS_PER_THREAD_SPREAD = 10  # the spread case: N runs over N / 10 threads


def serve_memory(workdir: Path, runs: int) -> dict[str, dict]:
    """{case: {"runs", "threads", "early_runs", "half_runs", "rss_early_mib", "rss_half_mib",
    "rss_end_mib", "state_early_kib", "state_end_kib", "state_peak_kib", "messages_early",
    "messages_end", "messages_peak", "seconds"}}: the state is the JSON of the values the
    last run answered (its thread's whole conversation; the peak, the largest over the runs), the
    part of the growth that is the conversation's own size."""
    return {
        "one thread": _measure(workdir / "serve-one", runs, threads=1),
        "many threads": _measure(
            workdir / "serve-many", runs, threads=max(1, runs // RUNS_PER_THREAD_SPREAD)
        ),
    }


def figures(found: dict[str, dict]) -> list[Figure]:
    """Per case, RSS after N runs next to RSS after 100 and after N/2 (the ratio is the growth;
    the second shows whether it has levelled off)."""
    rows = []
    for case in found.values():
        after, threads = f"after {case['runs']} runs", f"({case['threads']} threads)"
        for early, key in (
            (case["early_runs"], "rss_early_mib"),
            (case["half_runs"], "rss_half_mib"),
        ):
            rows.append(
                Figure(
                    "serve runs",
                    f"RSS {after} vs after {early} {threads}",
                    "MiB",
                    case["rss_end_mib"],
                    case[key],
                )
            )
        early = f"vs after {case['early_runs']} {threads}"
        rows.append(
            Figure(
                "serve runs",
                f"thread state {after} {early}",
                "KiB",
                case["state_end_kib"],
                case["state_early_kib"],
                better="",
            )
        )
        rows.append(
            Figure(
                "serve runs",
                f"largest thread state in {case['runs']} runs {early}",
                "KiB",
                case["state_peak_kib"],
                case["state_early_kib"],
                better="",
            )
        )
    return rows  # fmt: skip


def _measure(directory: Path, runs: int, threads: int) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    readings: dict[int, float] = {}
    states: dict[int, tuple[float, int]] = {}  # after run n: (the state's KiB, its messages)
    with (
        serve_process(directory) as (process, base),
        httpx.Client(base_url=base, timeout=120) as client,
    ):
        for n in range(runs):
            thread = f"t{n % threads}"
            body = {
                "assistant_id": "waypoint",
                "input": {"messages": [{"role": "user", "content": f"what is {n} plus 1"}]},
                "if_not_exists": "create",
            }
            answer = client.post(f"/threads/{thread}/runs/wait", json=body)
            answer.raise_for_status()
            states[n + 1] = (len(answer.content) / 1024, len(answer.json().get("messages", [])))
            if n + 1 in (min(EARLY, runs), max(1, runs // 2), runs):
                readings[n + 1] = rss_mib(process.pid)
    return {
        "runs": runs,
        "early_runs": min(EARLY, runs),
        "half_runs": max(1, runs // 2),
        "threads": threads,
        "rss_early_mib": readings[min(EARLY, runs)],
        "rss_half_mib": readings[max(1, runs // 2)],
        "rss_end_mib": readings[runs],
        "state_early_kib": states[min(EARLY, runs)][0],
        "state_end_kib": states[runs][0],
        "state_peak_kib": max(kib for kib, _ in states.values()),
        "messages_early": states[min(EARLY, runs)][1],
        "messages_end": states[runs][1],
        "messages_peak": max(count for _, count in states.values()),
        "seconds": time.perf_counter() - started,
    }


@contextmanager
def serve_process(directory: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """`serve` with the offline model on a database of its own."""
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "app",
        "serve",
        "--port",
        "0",
        "--db",
        str(directory / "agent.sqlite"),
        "--workspace",
        str(directory / "workspace"),
    ]
    log = directory / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=directory, env=clean_env(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield process, _url(process, log)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _url(process: subprocess.Popen, log: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise RuntimeError(f"serve did not start:\n{log.read_text()[-2000:]}")


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    if found is None:  # a kernel thread, or a process that has exited
        raise RuntimeError(f"no resident size in /proc/{pid}/status")
    return int(found.group(1)) / 1024
