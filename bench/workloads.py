"""The four workloads. Each returns plain dicts: its raw figures per variant (Waypoint, baseline).

1. `long_thread`: N turns on one thread, each variant in its own process; per-turn wall time at
   the start and end, bytes, rows.
2. `listings`: `threads list` and `history` first page on many threads and on a long thread.
3. `cold_start`: `--help` and the time to the first streamed token of a one-shot turn.
4. `concurrent`: four processes, four threads, one database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.measure import (
    bytes_on_disk,
    logical_bytes,
    median,
    median_time,
    p95,
    row_counts,
    timed,
)
from bench.model import question
from bench.together import finish, run_round, start_workers

REPO = Path(__file__).resolve().parent.parent
ONE_SHOT = "what is 6 times 7"
CONCURRENT_ROUNDS = 4  # warm processes: the variants take turns this many times (A B, B A, ...)


def window_size(turns: int) -> int:
    """Turns in the 'start' and 'end' windows: a tenth of the thread, between 5 and 50."""
    return max(5, min(50, turns // 10)) if turns >= 10 else max(1, turns // 2)


def long_thread(turns: int, workdir: Path) -> dict[str, dict]:
    """Run the three variants turn by turn, interleaved (so machine noise hits them alike), each in
    a process of its own (bench/thread_process.py: one's heap does not slow another's turns)."""
    from bench.thread_process import ThreadProcess

    paths = {name: workdir / f"thread-{turns}-{name}" / "agent.sqlite" for name in VARIANTS}
    processes: dict[str, ThreadProcess] = {}
    try:
        for name, path in paths.items():
            path.parent.mkdir(parents=True)
            processes[name] = ThreadProcess(name, path, workdir, clean_env())
        window = window_size(turns)
        samples: dict[str, list[float]] = {name: [] for name in processes}
        reference: dict[str, list[float]] = {name: [] for name in processes}
        before_end: dict[str, int] = {}
        started = time.perf_counter()
        for turn in range(1, turns + 1):
            text = question(turn)
            shift = turn % len(VARIANTS)
            at_end = turn > turns - window
            for name in VARIANTS[shift:] + VARIANTS[:shift]:
                with_reference = at_end and turns > REFERENCE_TURNS
                index = turn - (turns - window)
                if with_reference and index % 2:  # every other turn the reference goes first
                    _reference_turn(processes[name], index, reference[name])
                samples[name].append(processes[name].turn(text))
                if with_reference and not index % 2:
                    _reference_turn(processes[name], index, reference[name])
            if turn == turns - window:
                before_end = {name: logical_bytes(path) for name, path in paths.items()}
        elapsed = time.perf_counter() - started
        results = {}
        for name, process in processes.items():
            finished = process.finish(window)
            results[name] = _thread_figures(
                paths[name], samples[name], window, before_end.get(name, 0), finished
            )
            if reference[name]:
                results[name]["turn_ms_reference_median"] = 1000 * median(reference[name])
    finally:
        for process in processes.values():
            process.kill()
    results["_run"] = {"turns": turns, "window": window, "seconds": elapsed}
    return results


VARIANTS = ["session", "graph", "baseline"]
# A long thread's last turns are compared with turns 6-10 of short threads run alongside them, in
# the same process, interleaved turn by turn: the two figures are taken under the same
# machine load (on a shared machine two windows minutes apart differ by more than the target).
# Which of the two runs first alternates: the first one runs just after another variant's turn
# (the baseline's, at turn 1,000, a quarter of a second through gigabytes, leaves the CPU's caches
# cold), the second just after its own process's; always running the long turn first charged
# only it with the cold caches.
REFERENCE_TURNS = 10


def _reference_turn(process: Any, index: int, kept: list[float]) -> None:
    """Reference turn `index` (1-based) of the end window: turn ((index-1) % 10) + 1 of short
    thread (index-1) // 10; the time of its turns 6-10 is kept."""
    number = (index - 1) % REFERENCE_TURNS + 1
    seconds = process.turn(question(number), f"reference-{(index - 1) // REFERENCE_TURNS}")
    if number > REFERENCE_TURNS // 2:
        kept.append(seconds)


def _thread_figures(
    db_path: Path, times: list[float], window: int, bytes_before_end: int, finished: dict
) -> dict:
    checkpoints, writes = row_counts(db_path)
    logical = logical_bytes(db_path)
    return {
        "turn_ms_start_median": 1000 * median(times[:window]),
        "turn_ms_start_p95": 1000 * p95(times[:window]),
        "turn_ms_end_median": 1000 * median(times[-window:]),
        "turn_ms_end_p95": 1000 * p95(times[-window:]),
        "db_bytes_on_disk": bytes_on_disk(db_path),
        "db_bytes_logical": logical,
        "bytes_per_turn_end": (logical - bytes_before_end) / window,
        "message_json_bytes_per_turn": finished["message_json_bytes_per_turn"],
        "checkpoint_rows": checkpoints,
        "write_rows": writes,
    }


def listings(threads: int, long_dbs: dict[str, Path], workdir: Path, repeats: int) -> dict:
    """Generate a many-threads database per variant (timed apart), then time each listing."""
    from bench import listing
    from bench.runners import BaselineRunner, GraphRunner

    many = {
        "waypoint": workdir / "many-waypoint" / "agent.sqlite",
        "baseline": workdir / "many-baseline" / "agent.sqlite",
    }
    for path in many.values():
        path.parent.mkdir(parents=True)
    generators: dict[str, GraphRunner | BaselineRunner] = {
        "waypoint": GraphRunner(many["waypoint"]),
        "baseline": BaselineRunner(many["baseline"]),
    }
    generation = dict.fromkeys(generators, 0.0)
    for n in range(threads):
        for name, runner in generators.items():
            generation[name] += timed(partial(runner.turn, question(n + 1), f"t{n:04d}"))
    for runner in generators.values():
        runner.close()

    one_of_many = f"t{threads // 2:04d}"
    cases = {
        "threads_list_many": (
            lambda: listing.waypoint_threads(many["waypoint"]),
            lambda: listing.baseline_threads(many["baseline"]),
        ),
        "history_many": (
            lambda: listing.waypoint_history(many["waypoint"], one_of_many),
            lambda: listing.baseline_history(many["baseline"], one_of_many),
        ),
        "threads_list_long": (
            lambda: listing.waypoint_threads(long_dbs["waypoint"]),
            lambda: listing.baseline_threads(long_dbs["baseline"]),
        ),
        "history_long": (
            lambda: listing.waypoint_history(long_dbs["waypoint"], "bench"),
            lambda: listing.baseline_history(long_dbs["baseline"], "bench"),
        ),
    }
    results: dict = {
        "threads": threads,
        "generation_s": generation,
        "db_bytes": {name: bytes_on_disk(path) for name, path in many.items()},
    }
    for case, (waypoint, baseline) in cases.items():
        results[case] = {
            "waypoint": median_time(waypoint, repeats),
            "baseline": median_time(baseline, repeats),
        }
    cli = {
        "threads_list_cli": (
            [
                sys.executable,
                "-m",
                "app",
                "threads",
                "list",
                "--json",
                "--db",
                str(many["waypoint"]),
            ],
            [sys.executable, "-m", "bench.baseline_cli", "threads", "--db", str(many["baseline"])],
        ),
        "history_cli": (
            [
                sys.executable,
                "-m",
                "app",
                "history",
                "-t",
                "bench",
                "--json",
                "--db",
                str(long_dbs["waypoint"]),
            ],
            [
                sys.executable,
                "-m",
                "bench.baseline_cli",
                "history",
                "-t",
                "bench",
                "--db",
                str(long_dbs["baseline"]),
            ],
        ),
    }
    for case, (waypoint_command, baseline_command) in cli.items():
        results[case] = {
            "waypoint": median_time(
                partial(_run, warmed(waypoint_command, workdir), workdir), repeats
            ),
            "baseline": median_time(
                partial(_run, warmed(baseline_command, workdir), workdir), repeats
            ),
        }
    return results


def clean_env() -> dict[str, str]:
    """The environment for subprocesses: no model credentials or APP_* settings, the repo importable,
    and Python's bytecode cache on (as for an installed program: a machine that sets
    PYTHONDONTWRITEBYTECODE would make every process compile every module of the repository again,
    which weighs on whichever program has more modules of its own)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("APP_", "OPENAI_"))
        and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    return env | {"PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "120"}


def warmed(command: list[str], cwd: Path) -> list[str]:
    """Run `command` once untimed (its modules' bytecode is written then), and give it back."""
    _run(command, cwd)
    return command


def _run(command: list[str], cwd: Path) -> float:
    """Seconds a subprocess took to exit; it must succeed."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=clean_env(), capture_output=True, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    return elapsed


def first_token(command: list[str], cwd: Path) -> tuple[float, float]:
    """(seconds to the first `token` event on stdout, seconds to exit) of a one-shot turn."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = None
    assert process.stdout is not None
    for line in process.stdout:
        if first is None and b'"token"' in line:
            first = time.perf_counter() - started
    stderr = process.stderr.read() if process.stderr else b""
    code = process.wait(timeout=600)
    total = time.perf_counter() - started
    if code != 0 or first is None:
        raise RuntimeError(f"{' '.join(command)} gave no token (exit {code}): {stderr[-2000:]!r}")
    return first, total


# Any program that runs a LangGraph graph on SQLite imports at least this much.
STACK_IMPORTS = (
    "import langgraph.graph, langgraph.checkpoint.sqlite, langchain_core.language_models"
)


def cold_start(workdir: Path, repeats: int) -> dict:
    python = sys.executable
    helps = {
        "waypoint": warmed([python, "-m", "app", "--help"], workdir),
        "baseline": warmed([python, "-m", "bench.baseline_cli", "--help"], workdir),
    }
    floor = warmed([python, "-c", STACK_IMPORTS], workdir)
    results: dict = {
        "interpreter_s": median([_run([python, "-c", "pass"], workdir) for _ in range(repeats)]),
        "stack_import_s": median([_run(floor, workdir) for _ in range(repeats)]),
        "help_s": {},
        "first_token_s": {},
        "one_shot_total_s": {},
    }
    for name, command in helps.items():
        results["help_s"][name] = median([_run(command, workdir) for _ in range(repeats)])
    results["repl_prompt_s"] = median(
        [repl_prompt(workdir / f"repl-{i}" / "agent.sqlite", workdir) for i in range(repeats + 1)][
            1:
        ]
    )
    for name in ("waypoint", "baseline"):
        firsts, totals = [], []
        for i in range(-1, repeats):  # run -1 warms the bytecode cache
            db = workdir / f"cold-{name}-{i}" / "agent.sqlite"
            if name == "waypoint":
                command = [
                    python,
                    "-m",
                    "app",
                    "chat",
                    "--model",
                    "offline",
                    "--jsonl",
                    "--db",
                    str(db),
                    "--workspace",
                    str(db.parent / "workspace"),
                    "--thread",
                    "cold",
                    "-m",
                    ONE_SHOT,
                ]
            else:
                db.parent.mkdir(parents=True)
                command = [
                    python,
                    "-m",
                    "bench.baseline_cli",
                    "chat",
                    "--db",
                    str(db),
                    "--thread",
                    "cold",
                    "-m",
                    ONE_SHOT,
                ]
            first, total = first_token(command, workdir)
            if i >= 0:
                firsts.append(first)
                totals.append(total)
        results["first_token_s"][name] = median(firsts)
        results["one_shot_total_s"][name] = median(totals)
    return results


PROMPT_WAIT_S = 60


def repl_prompt(db: Path, cwd: Path) -> float:
    """Seconds from starting `chat --thread demo` on a terminal (a pseudo-terminal) to its prompt
    being drawn; the REPL is then left with /exit."""
    import pty
    import select

    db.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "app", "chat", "--thread", "demo", "--db", str(db)]
    command += ["--workspace", str(db.parent / "workspace")]
    env = clean_env() | {"TERM": "dumb", "PROMPT_TOOLKIT_NO_CPR": "1"}
    leader, follower = pty.openpty()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    seen, drawn = b"", None
    try:
        while drawn is None and time.perf_counter() - started < PROMPT_WAIT_S:
            if select.select([leader], [], [], 1)[0]:
                seen += os.read(leader, 65536)
                if b"demo> " in seen:
                    drawn = time.perf_counter() - started
        if drawn is None:
            raise RuntimeError(f"no REPL prompt within {PROMPT_WAIT_S} s: {seen[-2000:]!r}")
        os.write(leader, b"/exit\r")
        while process.poll() is None:  # read on, or output would fill the terminal and block it
            if select.select([leader], [], [], 1)[0]:
                try:
                    os.read(leader, 65536)
                except OSError:  # the terminal's other end closed with the process
                    break
        process.wait(timeout=PROMPT_WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    return drawn


def concurrent(workdir: Path, processes: int, turns: int) -> dict:
    """`processes` workers per variant, one thread each, on one database per variant. Every worker
    is started and set up first; then the variants take turns, CONCURRENT_ROUNDS times (A B, B A,
    …): all of a variant's workers run their next share of the turns together while the other
    variant's wait (so the two never share the CPUs, and a burst of the machine's other load hits
    both alike)."""
    from app.store import open_checkpointer
    from bench.runners import baseline_saver

    workers: dict[str, list[subprocess.Popen]] = {}
    dbs: dict[str, Path] = {}
    for kind in ("waypoint", "baseline"):
        dbs[kind] = db = workdir / f"concurrent-{processes}-{kind}" / "agent.sqlite"
        db.parent.mkdir(parents=True)
        if kind == "waypoint":
            with open_checkpointer(db):
                pass
        else:
            baseline_saver(db).conn.close()
        commands = [
            [sys.executable, "-m", "bench.worker", kind, str(db), f"w{i}", str(turns)]
            for i in range(processes)
        ]
        workers[kind] = start_workers(commands, workdir, clean_env())
    rounds: dict[str, list[list[dict]]] = {kind: [] for kind in workers}
    for index, share in enumerate(round_shares(turns, CONCURRENT_ROUNDS)):
        for kind in list(workers)[:: 1 if index % 2 == 0 else -1]:
            rounds[kind].append(run_round(workers[kind], share))
    results: dict = {"processes": processes, "turns_per_process": turns}
    for kind, group in workers.items():
        finish(group)
        results[kind] = _combined(rounds[kind]) | kept(kind, dbs[kind], processes)
    return results


def round_shares(turns: int, rounds: int) -> list[int]:
    """`turns` split into at most `rounds` shares, as even as they go (none empty)."""
    shares = [turns // rounds + (1 if i < turns % rounds else 0) for i in range(rounds)]
    return [share for share in shares if share]


def _combined(rounds: list[list[dict]]) -> dict:
    """One variant's figures over its rounds: each round's wall time runs from the first worker's
    start to the last one's end; the throughput is every turn over the sum of those."""
    reports = [report for round_ in rounds for report in round_]
    wall = sum(max(r["end"] for r in round_) - min(r["start"] for r in round_) for round_ in rounds)
    done = sum(r["turns_ok"] for r in reports)
    return {
        "turns_per_s": done / wall,
        "turns_ok": done,
        "errors": sum(r["errors"] for r in reports),
        "error_samples": [e for r in reports for e in r["error_samples"]][:5],
        "wall_s": wall,
        "turn_ms_median": 1000 * median([t for r in reports for t in r["turn_s"]]),
        # CPU the workers spent per answered turn: with the CPUs busy, throughput is this; with
        # them idle part of the time, it is the waits (SQLite's busy handler sleeps between tries).
        "cpu_ms_per_turn": 1000 * sum(r["cpu_s"] for r in reports) / max(done, 1),
    }


def kept(kind: str, db: Path, processes: int) -> dict:
    """What the database kept afterwards: SQLite's integrity verdict and the user turns in the
    workers' threads (every turn that succeeded must be there)."""
    from bench.soak import integrity, user_messages

    verdict = integrity(str(db))
    turns = 0
    if verdict == "ok":
        turns = sum(len(user_messages(kind, str(db), f"w{i}")) for i in range(processes))
    return {"integrity": verdict, "turns_kept": turns}


def soak_runs(workdir: Path, process_counts: tuple[int, ...], turns: int) -> dict[int, dict]:
    """The concurrency soak (bench/soak.py) with each number of processes, Waypoint's `chat -m`
    and the baseline's, each on a fresh database."""
    from bench.soak import soak

    results: dict[int, dict] = {}
    for processes in process_counts:
        results[processes] = {}
        for kind in ("waypoint", "baseline"):
            db = workdir / f"soak-{processes}-{kind}" / "agent.sqlite"
            db.parent.mkdir(parents=True)
            run = soak(str(db), processes, turns, clean_env(), workdir, kind=kind)
            results[processes][kind] = run.as_dict()
    return results
