"""serve logs no line per request unless started with --access-log, as `langgraph dev` (real
`serve` processes)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.server_process import plain_server


def served_log(tmp_path: Path, *args: str) -> str:
    """The server's output after one answered request (uvicorn writes the request's line before
    the answer, so it is in the log once the answer is here)."""
    with plain_server(tmp_path, "--db", str(tmp_path / "agent.sqlite"), *args) as (_, base):
        assert httpx.get(f"{base}/ok", timeout=10).status_code == 200
    return (tmp_path / "server.log").read_text()


def test_serve_logs_no_request_lines_by_default(tmp_path: Path):
    log = served_log(tmp_path)
    assert "Uvicorn running on" in log
    assert "GET /ok" not in log


def test_access_log_logs_each_request(tmp_path: Path):
    assert '"GET /ok HTTP/1.1" 200' in served_log(tmp_path, "--access-log")
