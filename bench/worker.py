"""One process of the concurrency workload: `python -m bench.worker KIND DB THREAD TURNS`.

Prints `ready` once set up, waits for a line on stdin (so all workers start together), runs TURNS
turns on THREAD and prints a JSON report: turns that succeeded, errors, and wall-clock bounds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench.model import question
from bench.runners import BaselineRunner, SessionRunner, settle_heap


def main(argv: list[str]) -> int:
    kind, db, thread_id, turns = argv[0], Path(argv[1]), argv[2], int(argv[3])
    runner = SessionRunner(db, thread_id) if kind == "waypoint" else BaselineRunner(db, thread_id)
    if kind == "waypoint":
        settle_heap()
    print("ready", flush=True)
    sys.stdin.readline()
    report: dict = {"turns_ok": 0, "errors": 0, "error_samples": [], "turn_s": []}
    report["start"] = time.time()
    cpu_started = time.process_time()
    for turn in range(1, turns + 1):
        started = time.perf_counter()
        try:
            runner.turn(question(turn))
        except Exception as exc:  # counted, not fatal: the workload reports errors per variant
            report["errors"] += 1
            if len(report["error_samples"]) < 3:
                report["error_samples"].append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        report["turn_s"].append(time.perf_counter() - started)
        report["turns_ok"] += 1
    report["end"] = time.time()
    report["cpu_s"] = time.process_time() - cpu_started
    runner.close()
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
