"""Four processes run `chat -m` turns on one database at once, on one shared thread and on a thread
each: every turn that exited 0 is in its thread's history, no turn fails but for a busy shared
thread, and the database stays intact (the full soak is in `python -m bench`)."""

from __future__ import annotations

import os
from pathlib import Path

from bench.soak import soak
from tests.conftest import REPO

PROCESSES, TURNS = 4, 6


def test_four_processes_on_one_database_lose_no_answered_turn(database: str, isolated: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = soak(database, PROCESSES, TURNS, env, isolated)
    assert result.errors == [] and result.lost == [] and result.integrity == "ok"
    assert result.answered + result.busy == PROCESSES * TURNS
    # every process's own thread always answers; the shared one answers at least once
    assert result.answered >= PROCESSES * TURNS // 2 + 1
