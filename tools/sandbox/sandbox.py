"""Sandbox: the limits and isolation settings of one sandbox, whether isolation works (probed once
per configuration), and running a program in it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from functools import cached_property
from pathlib import Path

from tools.errors import ToolError, ToolInputError
from tools.sandbox.cgroup import Hierarchy, TreeBounds, TreeCgroup, plan_bounds
from tools.sandbox.command import ENV, sandbox_command
from tools.sandbox.limits import KIB, MIB, Limit
from tools.sandbox.outcome import RunResult, SandboxSetupError, read_outcome
from tools.sandbox.probe import host_view, judge_bounds, judge_probe, probe_program
from tools.sandbox.process import Stream, kill_sandbox, pump, reap
from tools.sandbox.root import hidden_dirs, inside_any

NOBODY = 65534
_STATUS_BYTES = 16 * KIB

_PROBE_LOCK = threading.Lock()
_PROBE_CACHE: dict[tuple[object, ...], tuple[bool, str]] = {}


class Sandbox:
    """Runs Python programs isolated from the machine; see RELIABILITY.md, section Tools.

    ``hide`` names extra host directories the code must not see. Only /usr, a few copied /etc files,
    /dev/{null,zero,full,random,urandom} and the interpreter's prefix are visible at all, so this only
    matters for directories inside those; the caller's working directory and home are always added.
    """

    def __init__(
        self,
        *,
        cpu_seconds: int = 5,
        wall_seconds: float = 10,
        memory_bytes: int = 512 * MIB,
        file_size_bytes: int = 16 * MIB,
        max_processes: int = 32,
        tmpfs_bytes: int = 32 * MIB,
        output_bytes: int = 64 * KIB,
        max_open_files: int = 256,
        cpus: float = 1.0,
        use_cgroup: bool = True,
        python: str | Path | None = None,
        hide: Iterable[str | Path] = (),
        unshare: str = "/usr/bin/unshare",
        setpriv: str = "/usr/bin/setpriv",
        prlimit: str = "/usr/bin/prlimit",
        uid: int = NOBODY,
        gid: int = NOBODY,
    ) -> None:
        for name, value in (
            ("cpu_seconds", cpu_seconds),
            ("wall_seconds", wall_seconds),
            ("memory_bytes", memory_bytes),
            ("file_size_bytes", file_size_bytes),
            ("max_processes", max_processes),
            ("tmpfs_bytes", tmpfs_bytes),
            ("output_bytes", output_bytes),
            ("max_open_files", max_open_files),
            ("cpus", cpus),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if uid == 0 or gid == 0:
            raise ValueError("the sandbox uid and gid must not be 0")
        self.cpu_seconds = int(cpu_seconds)
        self.wall_seconds = float(wall_seconds)
        self.memory_bytes = memory_bytes
        self.file_size_bytes = file_size_bytes
        self.max_processes = max_processes
        self.tmpfs_bytes = tmpfs_bytes
        self.output_bytes = output_bytes
        self.max_open_files = max_open_files
        self.cpus = float(cpus)
        self.use_cgroup = use_cgroup
        self._hierarchies: list[Hierarchy] = []  # set with ``bounds``
        self.python = Path(python) if python is not None else _default_python()
        self.hide = tuple(Path(p) for p in hide)
        self.unshare = unshare
        self.setpriv = setpriv
        self.prlimit = prlimit
        self.uid = uid
        self.gid = gid

    def available(self) -> tuple[bool, str]:
        """Probe, once per configuration, that isolation really works: ``(True, "")`` or
        ``(False, reason)``. The probe runs a program inside and checks what it sees."""
        key = (
            self.unshare,
            self.setpriv,
            self.prlimit,
            str(self.python),
            self.uid,
            self.gid,
            self.use_cgroup,
            os.geteuid(),  # a probe as root says nothing about a sandbox made by another user
        )
        with _PROBE_LOCK:
            if key not in _PROBE_CACHE:
                _PROBE_CACHE[key] = self._probe()
            return _PROBE_CACHE[key]

    @cached_property
    def bounds(self) -> TreeBounds:
        """What bounds the sandbox as a whole: a cgroup (v2 or v1) where one can be made here, else
        the rlimit fallback; see tools/sandbox/cgroup.py."""
        bounds, self._hierarchies = plan_bounds(
            self.memory_bytes, self.max_processes, self.cpus, use_cgroup=self.use_cgroup
        )
        return bounds

    def run(self, code: str) -> RunResult:
        """Run ``code`` as a Python 3 program in the sandbox and report how it ended.

        A failing program is a normal result. Raises ToolError when the sandbox is unavailable or
        cannot be built (nothing was run then), ToolInputError for code that is not valid UTF-8.
        The wall clock counts from launch, including the sandbox's setup.
        """
        ok, reason = self.available()
        if not ok:
            raise ToolError(
                f"code execution is unavailable on this machine: {reason}; nothing was run"
            )
        try:
            return self._execute(_encode(code))[0]
        except SandboxSetupError as exc:
            raise ToolError(
                f"code execution is unavailable on this machine: {exc}; nothing was run"
            ) from None

    def _probe(self) -> tuple[bool, str]:
        for tool in (self.unshare, self.setpriv, self.prlimit, "/bin/sh", str(self.python)):
            if not os.access(tool, os.X_OK):
                return False, f"{tool} is missing or not executable"
        try:
            with host_view() as host:
                result, host_uid, charged = self._execute(
                    probe_program(hidden_dirs(self.hide), host)
                )
        except SandboxSetupError as exc:
            if inside_any(self.python.resolve(), ["/usr"]):
                return False, str(exc)
            return False, (
                f"{exc}; the interpreter {self.python} must be readable by uid {self.uid} "
                "(Debian's python3 package in /usr/bin is)"
            )
        ok, reason = judge_probe(result, host_uid, host)
        return (ok, reason) if not ok else judge_bounds(self.bounds, charged)

    def _execute(self, code: bytes) -> tuple[RunResult, int | None, bool]:
        """Run the program; return its result, the host uid the sandbox ran as (from its init) and
        whether its cgroup, if any, accounted for it."""
        group = self._make_cgroup()
        started = time.monotonic()
        try:
            streams, killed_for = self._launch(code, group, started)
            tree_limit = group.limit_hit() if group else None
            peak = group.memory_peak() if group else None
            charged = group.charged() if group else False
        finally:
            if group:
                group.remove()
        result, host_uid = read_outcome(
            streams,
            killed_for,
            time.monotonic() - started,
            cpu_limit=self.cpu_seconds,
            wall_seconds=self.wall_seconds,
            tree_limit=tree_limit,
        )
        return replace(result, memory_peak_bytes=peak), host_uid, charged

    def _make_cgroup(self) -> TreeCgroup | None:
        """This run's cgroup with the tree's limits, or None in the rlimit fallback."""
        if self.bounds.mode == "rlimit":
            return None
        group = TreeCgroup(self._hierarchies)
        try:
            group.create(self.memory_bytes, self.max_processes, self.cpus)
        except OSError as exc:
            raise SandboxSetupError(f"could not make the sandbox's cgroup: {exc}") from None
        return group

    def _launch(
        self, code: bytes, group: TreeCgroup | None, started: float
    ) -> tuple[dict[str, Stream], Limit | None]:
        """Start the sandbox, feed it the program and read its pipes until they close or it is
        killed; return the streams and the host's reason for killing it, if any."""
        status_r, status_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            try:
                proc = subprocess.Popen(
                    sandbox_command(self, status_w, stderr_w, group.procs_files if group else ()),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,  # setup and util-linux diagnostics, not the program's
                    pass_fds=(status_w, stderr_w),
                    env=dict(ENV),
                    cwd="/",
                    start_new_session=True,
                )
            except OSError as exc:
                raise SandboxSetupError(f"could not start {self.setpriv}: {exc}") from None
            finally:
                os.close(status_w)
                os.close(stderr_w)
            with proc:
                assert proc.stdin and proc.stdout and proc.stderr
                cap = self.output_bytes
                streams = {
                    "stdout": Stream(proc.stdout.fileno(), cap, kill_on_overflow=True),
                    "stderr": Stream(stderr_r, cap, kill_on_overflow=True),
                    "status": Stream(status_r, _STATUS_BYTES),
                    "diagnostics": Stream(proc.stderr.fileno(), _STATUS_BYTES),
                }
                try:
                    killed_for = pump(proc, code, streams, started + self.wall_seconds)
                except BaseException:  # e.g. KeyboardInterrupt: never leave the sandbox running
                    kill_sandbox(proc)
                    raise
                finally:
                    reap(proc)
        finally:
            os.close(status_r)
            os.close(stderr_r)
        return streams, killed_for


def _default_python() -> Path:
    """The distribution's interpreter if there is one (it lives in /usr, which the sandbox shows),
    else the base interpreter of the running Python (its prefix is bound read-only)."""
    system = Path("/usr/bin/python3")
    if os.access(system, os.X_OK):
        return system
    return Path(getattr(sys, "_base_executable", None) or sys.executable)


def _encode(code: str) -> bytes:
    try:
        return code.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolInputError(
            "code contains characters that cannot be encoded as UTF-8 (lone surrogates); "
            "remove them and try again"
        ) from None
