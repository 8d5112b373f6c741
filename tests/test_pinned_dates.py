"""The suite gives the same results whatever the date: the tests marked `dated` (the weather, the
clock, the offline model's answers about them) pass again with the clock pinned to other days,
among them a 29 February and a 31 December just before midnight."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import PINNED_NOW, REPO

OTHER_DAYS = ["2028-02-29T23:59:30+00:00", "2026-12-31T23:59:30+00:00", "2027-07-04T00:00:01+00:00"]


def start_dated_tests(pinned_now: str) -> subprocess.Popen:
    env = {**os.environ, "WAYPOINT_TEST_NOW": pinned_now, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-m", "dated", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.skipif("WAYPOINT_TEST_NOW" in os.environ, reason="already a rerun on another day")
def test_the_dated_tests_pass_on_other_pinned_days():
    assert all(day[:10] != PINNED_NOW[:10] for day in OTHER_DAYS)
    runs = {day: start_dated_tests(day) for day in OTHER_DAYS}  # at once: they share nothing
    for day, process in runs.items():
        output, _ = process.communicate(timeout=900)
        summary = output.strip().splitlines()[-1]
        assert process.returncode == 0, f"on {day}:\n{output[-4000:]}"
        assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
