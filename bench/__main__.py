"""`python -m bench [--quick | --smoke] [--json FILE] [--keep DIR]`: run the workloads, print the table."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from bench import overhead, report, serve_memory, serve_speed, workloads

FULL = {
    "turns": (10, 100, 1000),
    "threads": 1000,
    "repeats": 5,
    "processes": (4, 8),
    "concurrent_turns": 100,
    "soak_processes": (1, 2, 4, 8),
    "soak_turns": 25,
    "overhead_turns": 20,
}
QUICK = {
    "turns": (10, 30),
    "threads": 30,
    "repeats": 1,
    "processes": (4, 8),
    "concurrent_turns": 12,
    "soak_processes": (1, 4, 8),
    "soak_turns": 6,
    "overhead_turns": 10,
}
# The smallest run that still goes through every workload: the test suite checks the report with it.
SMOKE = {
    "turns": (3, 5),
    "threads": 3,
    "repeats": 1,
    "processes": (2,),
    "concurrent_turns": 2,
    "soak_processes": (1, 2),
    "soak_turns": 2,
    "overhead_turns": 2,
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Waypoint's machinery cost against plain LangGraph, measured side by side.",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (a minute or two)")
    size.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest sizes: checks that every workload and the report work (seconds)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument(
        "--turns",
        type=int,
        nargs="+",
        help="thread lengths to run instead of the preset's (e.g. --turns 10 100)",
    )
    parser.add_argument(
        "--keep", type=Path, help="build the databases in this directory and keep them"
    )
    parser.add_argument(
        "--model-overhead",
        action="store_true",
        help="only measure Waypoint's own time per turn next to a model endpoint's fixed latency "
        "(a minute)",
    )
    parser.add_argument(
        "--model-latency",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds the endpoint takes per request, with --model-overhead (default 1.0)",
    )
    parser.add_argument(
        "--serve-runs",
        type=int,
        default=0,
        metavar="N",
        help="also measure serve's memory over N runs on one thread and over N/10 threads, "
        "and serve next to `langgraph dev` with 8 clients sending N/10 runs between them "
        "(e.g. 2000; a few minutes)",
    )
    return parser.parse_args(argv)


def meta(argv: list[str], preset: str, sizes: dict) -> dict:
    from app.config import load_settings

    settings = load_settings()
    return {
        "command": " ".join(["python -m bench", *argv]),
        "preset": preset,
        "quick": preset == "quick",
        "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()},
        "nproc": os.cpu_count(),
        "nproc_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {
            name: version(name)
            for name in (
                "langgraph",
                "langgraph-checkpoint",
                "langgraph-checkpoint-sqlite",
                "langgraph-prebuilt",
                "langchain-core",
            )
        },
        "waypoint_settings": {
            "context_tokens": settings.context_tokens,
            "max_iterations": settings.max_iterations,
        },
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tree": tree_state(),
    }


def tree_state() -> dict:
    """The commit measured and how many files differed from it (others may be editing the tree)."""
    from importlib.util import find_spec

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=workloads.REPO, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "changed_files": len(git("status", "--porcelain").splitlines()),
        "long_term_memory": find_spec("app.service.memory") is not None,
    }


class Results:
    """Figures and raw results so far; with `--json`, rewritten after every workload, so an
    interrupted run still leaves what it measured (`"complete": false`)."""

    def __init__(self, info: dict, json_path: Path | None) -> None:
        self.info = info
        self.json_path = json_path
        self.figures: list[report.Figure] = []
        self.raw: dict = {"threads": {}}
        self.targets: list[report.Target] = []

    def document(self, complete: bool) -> dict:
        return {
            "meta": self.info | {"complete": complete},
            "figures": [f.as_dict() for f in self.figures],
            "targets": [t.as_dict() for t in self.targets],
            "workloads": self.raw,
        }

    def save(self, complete: bool = False) -> None:
        if self.json_path:
            text = json.dumps(self.document(complete), indent=2, default=str)
            self.json_path.write_text(text + "\n")


def run(sizes: dict, workdir: Path, results: Results, log: Callable[[str], None]) -> None:
    raw = results.raw
    for turns in sizes["turns"]:
        log(f"thread of {turns} turns (session, graph, baseline interleaved) …")
        raw["threads"][turns] = workloads.long_thread(turns, workdir)
        results.figures += report.thread_figures(turns, raw["threads"][turns])
        results.save()
    largest = max(sizes["turns"])
    long_dbs = {
        "waypoint": workdir / f"thread-{largest}-session" / "agent.sqlite",
        "baseline": workdir / f"thread-{largest}-baseline" / "agent.sqlite",
    }
    log(f"listings: {sizes['threads']} threads, and the {largest}-turn thread …")
    raw["listings"] = workloads.listings(sizes["threads"], long_dbs, workdir, sizes["repeats"])
    results.figures += report.listing_figures(raw["listings"])
    results.save()
    log("cold start …")
    raw["cold_start"] = workloads.cold_start(workdir, sizes["repeats"])
    results.figures += report.cold_start_figures(raw["cold_start"])
    results.save()
    raw["concurrent"] = {}
    for processes in sizes["processes"]:
        log(f"{processes} processes on one database …")
        found = workloads.concurrent(workdir, processes, sizes["concurrent_turns"])
        raw["concurrent"][processes] = found
        results.figures += report.concurrent_figures(found)
        results.save()
    log(f"concurrency soak: {sizes['soak_turns']} `chat -m` turns per process …")
    raw["soak"] = workloads.soak_runs(workdir, sizes["soak_processes"], sizes["soak_turns"])
    results.figures += report.soak_figures(raw["soak"])
    results.targets = report.targets(raw["threads"], raw["listings"], raw["cold_start"])
    results.targets += report.concurrent_targets(raw["concurrent"])
    results.targets += report.soak_targets(raw["soak"])


def model_overhead(
    args: argparse.Namespace,
    sizes: dict,
    workdir: Path,
    results: Results,
    log: Callable[[str], None],
) -> int:
    """`--model-overhead`: only that workload, its table and its target."""
    turns, latency = sizes["overhead_turns"], args.model_latency
    log(f"model overhead: {turns} turns, {latency:g} s per request at the endpoint …")
    found = overhead.model_overhead(workdir, turns, latency)
    results.raw["model_overhead"] = found
    results.targets = overhead.targets(found)
    results.info["duration_s"] = 0.0
    results.save(complete=True)
    print(f"Waypoint's own time per `chat` turn next to the model's ({latency:g} s a request):")
    print(overhead.table(found))
    print("\ntargets:")
    print(report.targets_table(results.targets))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    preset = "smoke" if args.smoke else "quick" if args.quick else "full"
    sizes = {"smoke": SMOKE, "quick": QUICK, "full": FULL}[preset]
    if args.turns:
        sizes = sizes | {"turns": tuple(sorted(set(args.turns)))}
    info = meta(argv, preset, sizes)
    results = Results(info, args.json)
    started = time.perf_counter()

    def log(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {text}", file=sys.stderr, flush=True)

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="bench-", dir=args.keep))
    else:
        workdir = Path(tempfile.mkdtemp(prefix="waypoint-bench-"))
    try:
        if args.model_overhead:
            return model_overhead(args, sizes, workdir, results, log)
        run(sizes, workdir, results, log)
        if args.serve_runs:
            log(f"serve: {args.serve_runs} runs on one thread, then over many threads …")
            results.raw["serve"] = serve_memory.serve_memory(workdir, args.serve_runs)
            results.figures += serve_memory.figures(results.raw["serve"])
            results.save()
            per_client = max(2, args.serve_runs // 10 // serve_speed.CLIENTS)
            log(f"serve and langgraph dev: {serve_speed.CLIENTS} clients × {per_client} runs …")
            results.raw["serve_speed"] = serve_speed.serve_speed(workdir, per_client)
            results.figures += serve_speed.figures(results.raw["serve_speed"])
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    info["duration_s"] = time.perf_counter() - started
    results.save(complete=True)
    print(
        f"Waypoint vs plain LangGraph (create_react_agent + default SqliteSaver); "
        f"nproc {info['nproc']}; ratio = Waypoint / baseline; * = worse than the baseline"
    )
    print(report.table(results.figures))
    for processes, concurrent in results.raw["concurrent"].items():
        print(
            f"\n{processes} processes: errors Waypoint {concurrent['waypoint']['errors']}, "
            f"baseline {concurrent['baseline']['errors']}; integrity "
            f"{concurrent['waypoint']['integrity']} / {concurrent['baseline']['integrity']}"
        )
    print(
        "\nconcurrency soak (`chat -m` turns; half on one shared thread, half on each process's own):"
    )
    print(report.soak_table(results.raw["soak"]))
    cold = results.raw["cold_start"]
    print(f"cold start floor (python -c pass): {cold['interpreter_s']:.2f} s")
    print(
        f"LangGraph stack import floor ({workloads.STACK_IMPORTS}): {cold['stack_import_s']:.2f} s"
        f" = {cold['stack_import_s'] / cold['one_shot_total_s']['baseline']:.2f}x the baseline's "
        "one-shot turn"
    )
    print("\ntargets" + ("" if preset == "full" else f" ({preset} sizes)") + ":")
    print(report.targets_table(results.targets))
    print(f"\n{info['command']}: {info['duration_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
