"""One process of the concurrency workload: `python -m bench.worker KIND DB THREAD TURNS`.

Prints `ready` once set up. Then, for each line on stdin (a number of turns: all the workers of a
variant get theirs together, and the variants take turns), runs that many more turns of THREAD's
TURNS and prints a JSON report of the round: turns that succeeded, errors, wall-clock bounds and CPU
time. It exits after the last turn.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.model import question
from bench.runners import BaselineRunner, Runner, SessionRunner, settle_process


def main(argv: list[str]) -> int:
    kind, db, thread_id, turns = argv[0], Path(argv[1]), argv[2], int(argv[3])
    runner = SessionRunner(db, thread_id) if kind == "waypoint" else BaselineRunner(db, thread_id)
    if kind == "waypoint":
        settle_process()
    print("ready", flush=True)
    done = 0
    while done < turns and (line := sys.stdin.readline()):
        count = min(int(line), turns - done)
        print(json.dumps(run_round(runner, range(done + 1, done + count + 1))), flush=True)
        done += count
    runner.close()
    return 0


def run_round(runner: Runner, turns: range) -> dict[str, Any]:
    """Turns `turns` (1-based numbers of the thread's turns), timed; a failed turn is counted, not
    fatal: the workload reports errors per variant."""
    report: dict[str, Any] = {"turns_ok": 0, "errors": 0, "error_samples": [], "turn_s": []}
    report["start"] = time.time()
    cpu_started = time.process_time()
    for turn in turns:
        started = time.perf_counter()
        try:
            runner.turn(question(turn))
        except Exception as exc:
            report["errors"] += 1
            if len(report["error_samples"]) < 3:
                report["error_samples"].append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        report["turn_s"].append(time.perf_counter() - started)
        report["turns_ok"] += 1
    report["end"] = time.time()
    report["cpu_s"] = time.process_time() - cpu_started
    return report


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
