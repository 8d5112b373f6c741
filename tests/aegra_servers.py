"""Aegra 0.11 for the tests: the Python 3.12 venv scripts/aegra_env.sh makes, a private Redis, and
Aegra instances (real uvicorn processes on 127.0.0.1) sharing one PostgreSQL database and that Redis."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import httpx
import pytest

from tests.conftest import PINNED_NOW, TEST_USER
from tests.pg_server import Server

REPO = Path(__file__).resolve().parent.parent
AEGRA_VERSION = "0.11.0"
DEFAULT_VENV = REPO / ".venv-aegra"
# Short leases so a killed instance's run is taken over in seconds, not Aegra's ~50 s default; only
# for the take-over test: on a loaded machine a live worker misses a 6 s lease, and Aegra then runs
# the run a second time while the first still streams (docs/notes/aegrazero.md).
FAST_TAKEOVER = {
    "LEASE_DURATION_SECONDS": "6",
    "HEARTBEAT_INTERVAL_SECONDS": "2",
    "REAPER_INTERVAL_SECONDS": "2",
}


class AegraUnavailable(Exception):
    """No Aegra venv, or no redis-server, on this machine."""


def aegra_python() -> Path:
    """The venv's python with aegra-api 0.11.0 (WAYPOINT_AEGRA_VENV, else .venv-aegra)."""
    venv = Path(os.environ.get("WAYPOINT_AEGRA_VENV") or DEFAULT_VENV)
    python = venv / "bin" / "python"
    if not python.exists():
        raise AegraUnavailable(f"no Aegra venv at {venv}: run scripts/aegra_env.sh")
    probe = subprocess.run(
        [str(python), "-I", "-c", "import importlib.metadata as m; print(m.version('aegra-api'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.stdout.strip() != AEGRA_VERSION:
        raise AegraUnavailable(f"{venv} has no aegra-api {AEGRA_VERSION}: {probe.stderr[-300:]}")
    return python


def unavailable(reason: str) -> NoReturn:
    """Skip for want of Aegra, or fail where it must be there (WAYPOINT_REQUIRE_AEGRA=1, CI)."""
    if os.environ.get("WAYPOINT_REQUIRE_AEGRA") == "1":
        pytest.fail(f"{reason} (WAYPOINT_REQUIRE_AEGRA=1)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def redis_server(tmp: Path) -> Iterator[str]:
    """A Redis on a free loopback port with a random password, no persistence; yields REDIS_URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise AegraUnavailable("redis-server is not installed (apt-get install redis-server)")
    password = secrets.token_hex(16)
    port = free_port()
    # The password goes in a private file, not on the command line other users can read.
    config = tmp / "redis.conf"
    config.touch(mode=0o600)
    config.write_text(
        f'bind 127.0.0.1\nport {port}\nrequirepass {password}\nsave ""\nappendonly no\n'
        f"dir {tmp}\nlogfile {tmp / 'redis.log'}\n"
    )
    process = subprocess.Popen([binary, str(config)], stdout=subprocess.DEVNULL)
    try:
        _wait_for_pong(port, password, process, tmp / "redis.log")
        yield f"redis://:{password}@127.0.0.1:{port}/0"
    finally:
        _stop(process)


def _wait_for_pong(port: int, password: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as conn:
            conn.sendall(f"AUTH {password}\r\nPING\r\n".encode())
            if b"+PONG" in _read_replies(conn):
                return
        time.sleep(0.1)
    raise AegraUnavailable(f"redis-server did not start: {_tail(log)}")


def _read_replies(conn: socket.socket) -> bytes:
    received = b""
    while received.count(b"\r\n") < 2:
        chunk = conn.recv(256)
        if not chunk:
            break
        received += chunk
    return received


@dataclass
class Instance:
    """One Aegra process; `base` is its URL."""

    name: str
    base: str
    process: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """kill -9: no shutdown, no lease released."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        _stop(self.process)

    def tail(self) -> str:
        return _tail(self.log)


def instance_env(
    database_url: str, redis_url: str, workspace: Path, app_db: str, **extra: str
) -> dict[str, str]:
    """What every instance needs: the config, PostgreSQL, the Redis broker, and Waypoint's settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "APP_", "REDIS_", "POSTGRES_", "AEGRA_"))
    }
    return env | {
        "AEGRA_CONFIG": str(REPO / "aegra.json"),
        "DATABASE_URL": database_url,
        "REDIS_BROKER_ENABLED": "true",
        "REDIS_URL": redis_url,
        "APP_DB": app_db,
        "APP_WORKSPACE": str(workspace),
        "APP_MEMORY_SCOPE": "user",  # Aegra's store API keeps items under ("users", identity)
        "PYTHONPATH": str(REPO),
        "LOG_LEVEL": "WARNING",
        "CRON_ENABLED": "false",
        # the pinned world of tests/conftest.py, which a module's fixture starts before
        "APP_NOW": PINNED_NOW,
        "TZ": "UTC",
        "USER": TEST_USER,
        "LOGNAME": TEST_USER,
        **extra,
    }


@dataclass
class Pair:
    """Two instances on one PostgreSQL database (`database_url`) and one Redis."""

    a: Instance
    b: Instance
    database_url: str

    def other(self, instance: Instance) -> Instance:
        return self.b if instance is self.a else self.a


@contextlib.contextmanager
def aegra_pair(pg: Server, tmp: Path, workspace: Path, **extra: str) -> Iterator[Pair]:
    """Two instances on fresh databases (Aegra's, and APP_DB: Waypoint's own store, shared) and a
    private Redis, stopped and dropped at the end. Raises AegraUnavailable without the venv or Redis."""
    python = aegra_python()
    with contextlib.ExitStack() as stack:
        redis_url = stack.enter_context(redis_server(tmp))
        database_url, app_db = pg.new_database(), pg.new_database()
        stack.callback(pg.drop_database, database_url)
        stack.callback(pg.drop_database, app_db)
        env = instance_env(database_url, redis_url, workspace, app_db, **extra)
        # One after the other: the first runs Aegra's migrations on the empty database.
        a = start_instance(python, env, tmp, "a")
        stack.callback(a.stop)
        b = start_instance(python, env, tmp, "b")
        stack.callback(b.stop)
        yield Pair(a, b, database_url)


def start_instance(python: Path, env: dict[str, str], tmp: Path, name: str) -> Instance:
    """`python -m uvicorn aegra_api.main:app` on a free port; returns once /health answers 200."""
    port = free_port()
    log = tmp / f"aegra-{name}.log"
    command = [str(python), "-m", "uvicorn", "aegra_api.main:app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--no-access-log"]
    workdir = tmp / f"cwd-{name}"
    workdir.mkdir(exist_ok=True)
    with open(log, "wb") as out:
        # cwd: a directory of its own, so no .env or aegra.json of the caller's is picked up
        process = subprocess.Popen(
            command, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    instance = Instance(name, f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_until_healthy(instance)
    except BaseException:
        instance.stop()
        raise
    return instance


def _wait_until_healthy(instance: Instance) -> None:
    """Until /health answers 200: the server's own start-up, not an ordering of two processes."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and instance.process.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{instance.base}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"Aegra {instance.name} did not start:\n{instance.tail()}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
