"""`python -m bench --quick` runs end to end and writes a consistent report (no timing targets)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

WORKLOADS = {"thread N=10", "thread N=30", "listings", "cold start", "4 processes"}
FIGURE_KEYS = {"workload", "metric", "unit", "waypoint", "baseline", "ratio", "better", "path"}


@pytest.mark.timeout(90)
def test_quick_benchmark_writes_a_consistent_report(tmp_path: Path):
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--json", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=80,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads(out.read_text())

    meta = report["meta"]
    assert meta["quick"] is True and meta["nproc"] >= 1 and meta["duration_s"] > 0
    assert meta["sizes"]["turns"] == [10, 30]

    figures = report["figures"]
    assert {f["workload"] for f in figures} == WORKLOADS
    for figure in figures:
        assert set(figure) == FIGURE_KEYS, figure
        assert figure["waypoint"] > 0 and figure["baseline"] > 0, figure
        assert math.isclose(figure["ratio"], figure["waypoint"] / figure["baseline"]), figure
        assert figure["better"] in {"lower", "higher", ""}

    names = {(f["workload"], f["metric"], f["path"]) for f in figures}
    for n in (10, 30):
        for path in ("session", "graph"):
            assert (f"thread N={n}", "turn p50, last turns", path) in names
        assert (f"thread N={n}", "checkpoint rows", "") in names
    assert ("cold start", "--help", "") in names
    assert ("4 processes", "turns per second (all processes)", "") in names

    concurrent = report["workloads"]["concurrent"]
    for kind in ("waypoint", "baseline"):
        assert concurrent[kind]["turns_ok"] + concurrent[kind]["errors"] == 4 * 6

    targets = report["targets"]
    assert targets and all(isinstance(t["met"], bool) and t["value"] > 0 for t in targets)

    stdout = done.stdout.decode()
    assert "Waypoint" in stdout and "baseline" in stdout and "ratio" in stdout
    for figure in figures:
        assert figure["metric"] in stdout
