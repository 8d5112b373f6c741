"""Commands are transactions: every command that refuses leaves the database and the workspace
byte for byte as they were (the rows of every table, every file)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import run_cli

REFUSALS = {
    "replay with a side effect, no --yes": lambda ids: [
        "replay",
        "-t",
        "tt",
        "-c",
        ids["t1_input"],
    ],
    "replay of an ended turn": lambda ids: ["replay", "-t", "tt", "-c", ids["head"]],
    "replay of an unknown checkpoint": lambda ids: ["replay", "-t", "tt", "-c", "ffffffffffff"],
    "rollback past the first turn": lambda ids: ["rollback", "-t", "tt", "--turns", "5"],
    "rollback to an unknown checkpoint": lambda ids: ["rollback", "-t", "tt", "-c", "ffffff"],
    "fork onto an existing thread": lambda ids: ["fork", "-t", "tt", "--to", "other"],
    "fork of an unknown thread": lambda ids: ["fork", "-t", "ghost", "--to", "new"],
    "import onto an existing thread": lambda ids: ["import", ids["export"], "--as", "other"],
    "delete without --yes": lambda ids: ["threads", "delete", "tt"],
    "delete of an unknown thread": lambda ids: ["threads", "delete", "ghost", "--yes"],
    "diff of an unknown checkpoint": lambda ids: ["diff", "-t", "tt", "ffffff", ids["head"]],
}


def snapshot(db: Path, workspace: Path) -> tuple[list[str], dict[str, bytes]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        rows = list(connection.iterdump())
    files = {
        str(p.relative_to(workspace)): p.read_bytes() for p in workspace.rglob("*") if p.is_file()
    }
    return rows, files


@pytest.fixture
def thread(isolated: Path) -> dict[str, str]:
    for thread, message in [
        ("tt", "write 'v1' to a.txt"),
        ("tt", "write 'plan' to plan.txt"),
        ("other", "what is 1 plus 1"),
    ]:
        assert run_cli("chat", "-t", thread, "-m", message, "--approve", "auto").returncode == 0
    every = json.loads(run_cli("history", "-t", "tt", "--all", "--json").stdout)
    export = isolated / "tt.json"
    assert run_cli("export", "-t", "tt", "-o", str(export)).returncode == 0
    t1_input = next(r for r in every if r["turn"] == 1 and r["source"] == "loop" and r["step"] == 0)
    return {
        "t1_input": t1_input["checkpoint_id"],
        "head": every[0]["checkpoint_id"],
        "export": str(export),
    }


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_command_changes_nothing(case: str, thread: dict, isolated: Path, db_path: Path):
    before = snapshot(db_path, isolated / "workspace")
    result = run_cli(*REFUSALS[case](thread))
    assert result.returncode == 2, (case, result.stderr.decode())
    assert snapshot(db_path, isolated / "workspace") == before, case
