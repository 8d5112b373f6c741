"""serve's throughput and CPU per run under the 8-client workload (docs/notes/servespeed.md);
with `--profile OUT`, py-spy (pip install py-spy) samples the thread holding the GIL meanwhile.
Run from a tree: PYTHONPATH=. python docs/notes/servespeed_measure.py 20 [--profile raw.txt]"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.serve_memory import serve_process
from bench.serve_speed import CLIENTS, _runs


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def py_spy(pid: int, out: str) -> subprocess.Popen:
    command = ["py-spy", "record", "-p", str(pid), "-o", out, "-f", "raw", "-r", "100"]
    return subprocess.Popen([*command, "--threads", "--gil"], stdout=subprocess.DEVNULL)


def main(runs: int, profile: str | None) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        serve_process(Path(directory) / "serve") as (process, base),
        ThreadPoolExecutor(CLIENTS) as pool,
    ):
        threads = [str(uuid.uuid4()) for _ in range(CLIENTS)]
        list(pool.map(lambda thread: _runs(base, thread, 1, 0), threads))
        spy = py_spy(process.pid, profile) if profile else None
        cpu, started = cpu_seconds(process.pid), time.perf_counter()
        timed = pool.map(lambda thread: _runs(base, thread, runs, 1), threads)
        latencies = sorted(seconds for client in timed for seconds in client)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(process.pid) - cpu
        if spy is not None:
            spy.send_signal(2)
            spy.wait()
    count = len(latencies)
    print(
        f"{count / elapsed:.1f} runs/s, median {1000 * latencies[count // 2]:.0f} ms; "
        f"serve CPU {1000 * cpu / count:.1f} ms/run ({cpu / elapsed:.2f} cores); "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(int(arguments[0]), arguments[2] if arguments[1:2] == ["--profile"] else None)
