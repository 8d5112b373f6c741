"""Every test gets its own database, workspace and working directory, no real model credentials, and a
pinned clock, time zone, locale and OS user (WAYPOINT_TEST_NOW moves the pinned instant)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.pg_server import PostgresUnavailable, Server, session_server

REPO = Path(__file__).resolve().parent.parent
# What the tools take as "now" in every test (and in the processes tests start): an ordinary day
# by default; tests/test_pinned_dates.py reruns the date-sensitive tests on other days.
PINNED_NOW = os.environ.get("WAYPOINT_TEST_NOW", "2026-06-15T10:30:00+00:00")
TEST_USER = "waypoint-tester"


@pytest.fixture(autouse=True)
def pinned_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The clock, time zone, locale and OS user a test sees, whatever the machine's."""
    monkeypatch.setenv("APP_NOW", PINNED_NOW)
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("LANG", "C.UTF-8")
    for name in ("USER", "LOGNAME"):
        monkeypatch.setenv(name, TEST_USER)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned_world: None) -> Path:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "APP_MODEL", "APP_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("APP_DB", str(tmp_path / "db" / "agent.sqlite"))
    monkeypatch.setenv("APP_WORKSPACE", str(tmp_path / "workspace"))
    monkeypatch.setenv("APP_BACKOFF_BASE", "0")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def db_path(isolated: Path) -> Path:
    return isolated / "db" / "agent.sqlite"


CLI_ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def run_cli(
    *args: str, input: bytes | None = None, columns: int = 200
) -> subprocess.CompletedProcess:
    """`python -m app ARGS` run in this process through the real entry point (`app.__main__.run`,
    the whole error boundary): stdin is `input` (not a terminal), stdout and stderr are captured as
    bytes, the terminal is `columns` wide, and the environment, working directory and database are
    the test's. Use `run_cli_process` only where the process itself is under test."""
    from app.__main__ import run

    stdin = io.TextIOWrapper(io.BytesIO(input or b""), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(
        io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    threads, handler = set(threading.enumerate()), signal.getsignal(signal.SIGINT)
    with _swapped_streams(stdin, stdout, stderr), _environment(CLI_ENV | {"COLUMNS": str(columns)}):
        try:
            code = run(list(args), prog_name="python -m app")
        except SystemExit as exc:  # as the interpreter would turn it into a status
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # `--debug` lets an internal error through, as a traceback
            traceback.print_exc()
            code = 1
        sys.stdout.flush()  # the run may have wrapped them (a broken pipe)
        sys.stderr.flush()
    _assert_nothing_left_running(threads, handler)
    return subprocess.CompletedProcess(
        ["python", "-m", "app", *args], code, stdout.buffer.getvalue(), stderr.buffer.getvalue()
    )


@contextlib.contextmanager
def _swapped_streams(stdin: IO[str], stdout: IO[str], stderr: IO[str]) -> Iterator[None]:
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _serves_a_test_server(thread: threading.Thread) -> bool:
    target = getattr(thread, "_target", None)
    return getattr(target, "__module__", None) == "socketserver"


def _kept_idle(thread: threading.Thread) -> bool:
    """Whether the thread belongs to a pool the process keeps between runs (app/service/pools.py;
    tests/test_run_pools.py bounds how many)."""
    from app.service.pools import POOLS

    return any(thread in getattr(pool, "_threads", ()) for pool in POOLS._idle)


def _assert_nothing_left_running(threads: set[threading.Thread], handler: object) -> None:
    """A run in the test process must leave it as it found it, or a later test would see the rest."""
    assert signal.getsignal(signal.SIGINT) is handler, "the run left its SIGINT handler installed"
    for thread in set(threading.enumerate()) - threads:
        if _serves_a_test_server(thread):
            continue  # a scripted server in the test answering (or holding) the run's request
        if thread.name.startswith("waypoint-run") and _kept_idle(thread):
            continue  # a kept run pool's thread, once a server in this process turned reuse on
        thread.join(timeout=10)
        assert not thread.is_alive(), f"the run left thread {thread.name!r} running"


def run_cli_process(
    *args: str, input: bytes | None = None, timeout: float = 90
) -> subprocess.CompletedProcess:
    """`python -m app ARGS` in a real subprocess, with the test's environment: for what only a
    process shows (the binary's exit status, signals, locks held by another process, a fresh
    interpreter's imports)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **CLI_ENV}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        input=input if input is not None else b"",
        capture_output=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    """One PostgreSQL server per session: WAYPOINT_TEST_PG_URL's, or a throwaway cluster. Missing
    binaries skip the Postgres tests, unless WAYPOINT_REQUIRE_POSTGRES=1 (CI), which fails them."""
    try:
        context = session_server()
        server = context.__enter__()
    except (PostgresUnavailable, RuntimeError, OSError) as exc:
        reason = f"PostgreSQL is not available: {exc}"
        if os.environ.get("WAYPOINT_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason} (WAYPOINT_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    try:
        yield server
    finally:
        context.__exit__(None, None, None)


@pytest.fixture
def pg_url(pg_server: Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test, also set as APP_DB."""
    url = pg_server.new_database()
    monkeypatch.setenv("APP_DB", url)
    try:
        yield url
    finally:
        pg_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, db_path: Path) -> str:
    """The test's --db value (also APP_DB): a SQLite file path, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(db_path)
    return request.getfixturevalue("pg_url")
