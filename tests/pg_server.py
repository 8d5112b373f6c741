"""A throwaway PostgreSQL cluster for the test session: initdb in a temp dir, loopback only, stopped
at the end. Run as an unprivileged user when the tests run as root (initdb refuses root)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
SUPERUSER = "waypoint"
PASSWORD = "pg-Secret-7f3a"  # tests assert this never reaches any output
# The cluster's own system user: not `nobody`, which the run_python sandbox uses (its tests count
# every process of that user, and PostgreSQL starts workers at any moment).
UNPRIVILEGED = "waypoint-pg"


class PostgresUnavailable(Exception):
    """No PostgreSQL binaries (or no way to run them) on this machine."""


def find_bin_dir() -> Path:
    for directory in [*PG_BIN_DIRS, *(Path(p) for p in os.environ.get("PATH", "").split(":"))]:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    raise PostgresUnavailable("PostgreSQL server binaries (initdb, pg_ctl) are not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Cluster:
    """A running cluster; `url(db)` is a postgresql:// URL with the superuser's password."""

    root: Path
    port: int
    bin_dir: Path
    databases: list[str] = field(default_factory=list)

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{SUPERUSER}:{password}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        _run_as_owner(
            [
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.root / "data"),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _owner_prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={_gid()}", "--clear-groups", "--"]


def _gid() -> int:
    return pwd.getpwnam(UNPRIVILEGED).pw_gid


def _ensure_user() -> None:
    """Create the cluster's system user once (as root; initdb refuses to run as root)."""
    try:
        pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                UNPRIVILEGED,
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )


def _run_as_owner(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [*_owner_prefix(), *args], capture_output=True, text=True, timeout=120, cwd="/"
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} failed: {result.stdout}\n{result.stderr}")
    return result


def start_cluster() -> Cluster:
    """initdb + pg_ctl start on 127.0.0.1 (password auth over TCP, fsync off for speed)."""
    bin_dir = find_bin_dir()
    root = Path(tempfile.mkdtemp(prefix="waypoint-pg-"))
    if os.geteuid() == 0:
        _ensure_user()
        os.chown(root, pwd.getpwnam(UNPRIVILEGED).pw_uid, _gid())
    (pwfile := root / "pw").write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        os.chown(pwfile, pwd.getpwnam(UNPRIVILEGED).pw_uid, _gid())
    _run_as_owner(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(root / "data"),
            "-U",
            SUPERUSER,
            "--pwfile",
            str(pwfile),
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ]
    )
    port = free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    _run_as_owner(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(root / "data"),
            "-o",
            options,
            "-l",
            str(root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        ]
    )
    return Cluster(root, port, bin_dir)


@dataclass
class Server:
    """Where test databases are made: our own cluster, or WAYPOINT_TEST_PG_URL's server."""

    admin_url: str
    cluster: Cluster | None = None
    created: list[str] = field(default_factory=list)

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"wp_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        self.created.append(name)
        return _with_database(self.admin_url, name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1].split("?")[0]
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(self.admin_url, autocommit=True) as conn,
        ):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


def _with_database(url: str, name: str) -> str:
    head, _, tail = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{tail}" if tail else "")


@contextlib.contextmanager
def session_server() -> Iterator[Server]:
    """WAYPOINT_TEST_PG_URL's server if set, else a throwaway cluster stopped at the end."""
    external = os.environ.get("WAYPOINT_TEST_PG_URL")
    if external:
        yield Server(external)
        return
    started = time.monotonic()
    cluster = start_cluster()
    server = Server(cluster.url(), cluster)
    server.started_in = time.monotonic() - started  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()
