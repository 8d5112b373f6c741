"""Settings and paths no one should give, given anyway: each is one line and exit 3, never an
internal error and never a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_cli_process

BAD_ENVIRONMENT = [
    ("APP_BUSY_TIMEOUT", "1e308"),
    ("APP_BUSY_TIMEOUT", "inf"),
    ("APP_BACKOFF_CAP", "inf"),
    ("APP_BACKOFF_BASE", "nan"),
    ("APP_MODEL_TIMEOUT", "-1"),
    ("APP_REQUEST_TIMEOUT", "0"),
    ("APP_USER", ""),
    ("APP_DB", "postgresql://[::1"),
    ("APP_DB", "postgresql://host:99999/db"),
]


@pytest.mark.parametrize(("name", "value"), BAD_ENVIRONMENT)
def test_a_meaningless_setting_is_one_line_and_exit_3(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
):
    assert run_cli("chat", "-t", "x", "-m", "what is 1 plus 1").returncode == 0
    monkeypatch.setenv(name, value)
    result = run_cli("threads", "list", columns=1000)  # one line: not wrapped at the width
    stderr = result.stderr.decode()
    assert result.returncode == 3, stderr
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "internal error" not in stderr


def test_a_settings_file_that_is_a_fifo_is_refused_without_hanging(isolated: Path):
    os.mkfifo(isolated / ".env")
    result = run_cli_process("threads", "list", timeout=60)  # a reader of the FIFO would block
    assert result.returncode == 3
    assert "is not a regular file" in result.stderr.decode()
