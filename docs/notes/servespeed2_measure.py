"""serve and `langgraph dev` under the 8-client workload of bench/serve_speed.py: runs/s, p95,
median and each server's CPU per run (its process and children, from /proc, over the timed part),
and its RSS at the end (its process only).
Run from a tree: PYTHONPATH=. python docs/notes/servespeed2_measure.py 20 [serve] [dev]"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.measure import p95
from bench.serve_memory import rss_mib, serve_process
from bench.serve_speed import CLIENTS, _runs, langgraph_dev
from bench.workloads import clean_env


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` and its children (langgraph dev may run its server in a child; one
    that has ended since pgrep saw it counts nothing)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    total = 0.0
    for process in [pid, *map(int, children.split())]:
        try:
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def measured(pid: int, base: str, runs: int) -> str:
    threads = [str(uuid.uuid4()) for _ in range(CLIENTS)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda thread: _runs(base, thread, 1, 0), threads))
        cpu, started = cpu_seconds(pid), time.perf_counter()
        timed = pool.map(lambda thread: _runs(base, thread, runs, 1), threads)
        latencies = sorted(seconds for client in timed for seconds in client)
        elapsed, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu
    count = len(latencies)
    return (
        f"{count / elapsed:.1f} runs/s, p95 {1000 * p95(latencies):.0f} ms, median "
        f"{1000 * latencies[count // 2]:.0f} ms, CPU {1000 * cpu / count:.1f} ms/run "
        f"({cpu / elapsed:.2f} cores), RSS {rss_mib(pid):.0f} MiB, load {os.getloadavg()[0]:.1f}"
    )


def main(runs: int, which: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        if "serve" in which:
            with serve_process(work / "serve") as (process, base):
                print("serve ", measured(process.pid, base, runs), flush=True)
        if "dev" in which:
            dev = work / "dev"
            with langgraph_dev(dev, dev / "workspace", clean_env()) as (process, base):
                print("dev   ", measured(process.pid, base, runs), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:] or ["serve", "dev"])
