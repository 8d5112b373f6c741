"""`python -m bench --smoke` runs every workload end to end and writes a consistent report. No
timing is checked: speed is the benchmark's business, not the suite's."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

WORKLOADS = {
    "thread N=3",
    "thread N=5",
    "listings",
    "cold start",
    "2 processes",
    "soak, 1 processes",
    "soak, 2 processes",
}
FIGURE_KEYS = {"workload", "metric", "unit", "waypoint", "baseline", "ratio", "better", "path"}


@pytest.mark.timeout(600)
def test_smoke_benchmark_writes_a_consistent_report(tmp_path: Path):
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--json", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads(out.read_text())

    meta = report["meta"]
    assert meta["preset"] == "smoke" and meta["nproc"] >= 1 and meta["duration_s"] > 0
    assert meta["sizes"]["turns"] == [3, 5]

    figures = report["figures"]
    assert {f["workload"] for f in figures} == WORKLOADS
    for figure in figures:
        assert set(figure) == FIGURE_KEYS, figure
        if figure["metric"].startswith("DB growth"):
            # a turn or two of a smoke-sized thread can fit in the pages already allocated
            assert figure["waypoint"] >= 0 and figure["baseline"] >= 0, figure
        else:
            assert figure["waypoint"] > 0 and figure["baseline"] > 0, figure
        if figure["baseline"]:
            assert math.isclose(figure["ratio"], figure["waypoint"] / figure["baseline"]), figure
        assert figure["better"] in {"lower", "higher", ""}

    names = {(f["workload"], f["metric"], f["path"]) for f in figures}
    for n in (3, 5):
        for path in ("session", "graph"):
            assert (f"thread N={n}", "turn p50, last turns", path) in names
        assert (f"thread N={n}", "checkpoint rows", "") in names
    assert ("cold start", "--help", "") in names
    assert ("cold start", "REPL prompt drawn (baseline: python -c pass)", "") in names
    assert ("2 processes", "turns per second (all processes)", "") in names
    assert ("soak, 2 processes", "`chat -m` turns answered per second", "") in names
    assert report["workloads"]["cold_start"]["stack_import_s"] > 0

    concurrent = report["workloads"]["concurrent"]["2"]
    for kind in ("waypoint", "baseline"):
        assert concurrent[kind]["turns_ok"] + concurrent[kind]["errors"] == 2 * 2
        assert concurrent[kind]["integrity"] == "ok"
        assert concurrent[kind]["turns_kept"] == concurrent[kind]["turns_ok"]

    soak = report["workloads"]["soak"]
    assert sorted(soak) == ["1", "2"]
    for processes, runs in soak.items():
        run = runs["waypoint"]
        assert run["clean"] and run["integrity"] == "ok" and not run["lost"], run
        assert run["answered"] + run["busy"] == int(processes) * 2, run
        baseline = runs["baseline"]
        assert baseline["busy"] == 0 and baseline["integrity"] == "ok", baseline
        assert baseline["answered"] + len(baseline["errors"]) == int(processes) * 2, baseline

    targets = report["targets"]
    assert targets and all(isinstance(t["met"], bool) and t["value"] >= 0 for t in targets)
    assert {t["name"] for t in targets} >= {
        "soak, 1 processes: turns failed or lost",
        "soak, 2 processes: turns failed or lost",
        "DB growth per turn at N=5",
        "REPL prompt drawn after start",
        "one-shot turn (whole process) vs baseline",
        "2 processes on one database: turns/s vs baseline, nothing failed or lost",
    }

    stdout = done.stdout.decode()
    assert "Waypoint" in stdout and "baseline" in stdout and "ratio" in stdout
    assert "concurrency soak" in stdout
    for figure in figures:
        assert figure["metric"] in stdout


def test_the_serve_memory_rows_measure_a_real_server(tmp_path: Path):
    from bench import serve_memory

    found = serve_memory.serve_memory(tmp_path, runs=4)
    assert [(c["runs"], c["threads"]) for c in found.values()] == [(4, 1), (4, 1)]
    rows = serve_memory.figures(found)
    assert [r.workload for r in rows] == ["serve runs"] * 8
    rss = [r for r in rows if r.unit == "MiB"]
    assert len(rss) == 4 and all(r.waypoint > 10 and r.baseline > 10 for r in rss)
    assert [r.metric for r in rows[:4]] == [
        "RSS after 4 runs vs after 4 (1 threads)",
        "RSS after 4 runs vs after 2 (1 threads)",
        "thread state after 4 runs vs after 4 (1 threads)",
        "largest thread state in 4 runs vs after 4 (1 threads)",
    ]
    one = found["one thread"]  # 4 turns: a question, a tool call, its result and the answer each
    assert one["messages_end"] == one["messages_peak"] == 16 and one["state_end_kib"] > 1


@pytest.mark.skipif(
    shutil.which("langgraph") is None and not os.environ.get("WAYPOINT_REQUIRE_LANGGRAPH"),
    reason="langgraph dev is not installed (langgraph-cli[inmem])",
)
def test_the_speed_rows_put_serve_next_to_langgraph_dev_on_the_same_runs(tmp_path: Path):
    from bench import serve_speed

    found = serve_speed.serve_speed(tmp_path, runs_per_client=1)
    assert list(found) == ["serve", "langgraph dev"]
    assert all(case["runs"] == case["clients"] == 8 for case in found.values())
    rows = serve_speed.figures(found)
    assert [(r.metric, r.better) for r in rows] == [
        ("runs/wait throughput, 8 clients", "higher"),
        ("runs/wait p95, 8 clients", "lower"),
        ("runs/wait median, 8 clients", "lower"),
        ("server RSS after the runs", "lower"),
    ]
    assert all(r.waypoint > 0 and r.baseline > 0 for r in rows)


@pytest.mark.timeout(300)
def test_model_overhead_reports_waypoints_time_next_to_the_endpoints(tmp_path: Path):
    """`--model-overhead`: chat turns against a fixed-latency endpoint on 127.0.0.1, each one tool
    call and an answer; Waypoint's share is the turn less the endpoint's time."""
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "bench", "--model-overhead", "--smoke"]
    done = subprocess.run(
        [*command, "--model-latency", "0.05", "--json", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    found = json.loads(out.read_text())["workloads"]["model_overhead"]

    assert found["turns"] == 2 and found["requests_per_turn"] == 2.0
    assert found["model_ms_median"] >= 2 * 50  # two requests of 0.05 s each
    assert found["turn_ms_median"] > found["model_ms_median"]
    assert found["own_ms_median"] > 0 and found["own_cpu_ms_median"] > 0
    assert "Waypoint's own / model" in done.stdout.decode()
