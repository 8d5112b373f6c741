"""Every test gets its own database, workspace and working directory, and no real model credentials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "APP_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("APP_DB", str(tmp_path / "db" / "agent.sqlite"))
    monkeypatch.setenv("APP_WORKSPACE", str(tmp_path / "workspace"))
    monkeypatch.setenv("APP_BACKOFF_BASE", "0")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def db_path(isolated: Path) -> Path:
    return isolated / "db" / "agent.sqlite"


def run_cli(
    *args: str, input: bytes | None = None, timeout: float = 90
) -> subprocess.CompletedProcess:
    """`python -m app ARGS` in a real subprocess, with the test's environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        input=input if input is not None else b"",
        capture_output=True,
        timeout=timeout,
        env=env,
    )
