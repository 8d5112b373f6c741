"""The run_python tool: model-written Python in a throwaway sandbox built from util-linux tools.

Namespaces (user, net, mount, pid, ipc, uts, cgroup), a minimal read-only root with a size-capped tmpfs
on /tmp, an unprivileged uid, rlimits and a wall-clock kill of the whole namespace. No sandbox, no run.
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from tools.errors import ToolError, ToolInputError

Limit = Literal["cpu", "wall", "memory", "file_size", "disk", "output", "processes"]

KIB = 1024
MIB = 1024 * KIB
MAX_CODE_CHARS = 20_000
NOBODY = 65534

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8", "HOME": "/tmp"}
# The sandbox's /etc holds copies of these small, world-readable files and nothing else.
_ETC_FILES = ("passwd", "group", "nsswitch.conf", "hosts", "host.conf")
_ETC_MAX_BYTES = 64 * KIB
_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_STDIO = ("stdin", "stdout", "stderr")
_DEVICES = ("null", "zero", "full", "random", "urandom")
# After the user code's process exits, everything left in the namespace dies with its init; this is
# only how long to wait for the pipes to close before giving up on them.
_DRAIN_SECONDS = 5.0
_PROBE_MARKER = "waypoint-sandbox-probe"
_STATUS_BYTES = 16 * KIB

# Mount options of the empty read-only tmpfs laid over a directory that must stay hidden.
_HIDDEN_OPTIONS = "ro,size=4k,nr_inodes=8,mode=0755,nosuid,nodev,noexec"

# PID 1 of the sandbox: starts the user code, reaps orphans, and reports how the code ended on the
# status fd (a pipe only the host reads). When it exits the kernel kills whatever is left.
_INIT_CODE = r"""
import os, signal, sys
fd, err = int(sys.argv[1]), int(sys.argv[2]); argv = sys.argv[3:]
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.set_inheritable(fd, False)
try:
    with open("/proc/self/uid_map") as f:
        host_uid = int(f.read().split()[1])
except (OSError, IndexError, ValueError):
    host_uid = -1
os.write(fd, b"ready\n")
pid = os.fork()
if pid == 0:
    try:
        os.dup2(err, 2)
        os.closerange(3, fd)
        os.closerange(fd + 1, 1 << 16)
        os.execv(argv[0], argv)
    except BaseException as exc:
        os.write(fd, ("execfail %s\n" % exc).encode())
    os._exit(127)
while True:
    done, status, usage = os.wait4(-1, 0)
    if done == pid:
        break
cpu = usage.ru_utime + usage.ru_stime
code = os.waitstatus_to_exitcode(status)
os.write(fd, ("done %d %.3f %d\n" % (code, cpu, host_uid)).encode())
"""

_PROBE_CODE = r"""
import json, os, socket
report = {"marker": MARKER, "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid()}
try:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    report["caps"] = [int(fields[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")]
    report["nnp"] = int(fields["NoNewPrivs"])
except OSError:
    report["caps"] = None
report["interfaces"] = sorted(name for _, name in socket.if_nameindex())
try:
    open("/etc/.waypoint-probe", "w").close()
    report["etc_writable"] = True
except OSError:
    report["etc_writable"] = False
report["visible"] = [p for p in HIDDEN if os.path.isdir(p) and os.listdir(p) or os.path.isfile(p)]
report["environ"] = sorted(os.environ)
print(json.dumps(report))
"""


@dataclass(frozen=True)
class RunResult:
    """How a sandboxed program ended: exit code or signal name, its (capped) output, the wall time
    in seconds and the limit that stopped it, if any."""

    exit_code: int | None
    signal: str | None
    stdout: str
    stderr: str
    duration: float
    limit_hit: Limit | None
    cpu_seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.limit_hit is None


class SandboxSetupError(Exception):
    """The sandbox could not be built, so the code was not started."""


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
        key = (self.unshare, self.setpriv, self.prlimit, str(self.python), self.uid, self.gid)
        with _PROBE_LOCK:
            if key not in _PROBE_CACHE:
                _PROBE_CACHE[key] = self._probe()
            return _PROBE_CACHE[key]

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
        hidden = [str(p) for p in self._hidden_dirs()]
        code = f"MARKER = {_PROBE_MARKER!r}\nHIDDEN = {hidden!r}\n{_PROBE_CODE}"
        try:
            result, host_uid = self._execute(code.encode())
        except SandboxSetupError as exc:
            if _inside_any(self.python.resolve(), ["/usr"]):
                return False, str(exc)
            return False, (
                f"{exc}; the interpreter {self.python} must be readable by uid {self.uid} "
                "(Debian's python3 package in /usr/bin is)"
            )
        return _judge_probe(result, host_uid)

    def _hidden_dirs(self) -> list[Path]:
        """``hide`` plus the caller's working directory and home (the workspace and DB live there)."""
        dirs = list(self.hide)
        for current in (Path.cwd, Path.home):
            try:
                dirs.append(current())
            except (OSError, RuntimeError):  # deleted cwd, no home
                continue
        return dirs

    def _command(self, status_fd: int, stderr_fd: int) -> list[str]:
        python = str(self.python.resolve())
        outer = [self.setpriv, "--no-new-privs", "--pdeathsig=KILL"]
        if os.geteuid() == 0:
            outer += [
                f"--reuid={self.uid}",
                f"--regid={self.gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
            ]
        inodes = max(1024, self.tmpfs_bytes // (4 * KIB))
        tmp_options = f"size={self.tmpfs_bytes},nr_inodes={inodes},mode=1777,nosuid,nodev"
        script = setup_script(plan_root(Path(python), self._hidden_dirs()), tmp_options)
        user_code = [
            # The code gets a nested user namespace in which it is an ordinary uid: exec as non-root
            # leaves it no capabilities and no_new_privs (inherited from the host side) forbids
            # gaining any. The outer root keeps its capabilities until here because mapping itself
            # into the nested namespace needs CAP_SETFCAP there.
            self.setpriv,
            "--no-new-privs",
            "--inh-caps=-all",
            "--",
            self.unshare,
            "--user",
            f"--map-user={self.uid}",
            f"--map-group={self.gid}",
            "--",
            self.prlimit,
            f"--cpu={self.cpu_seconds}:{self.cpu_seconds + 1}",
            f"--as={self.memory_bytes}",
            f"--fsize={self.file_size_bytes}",
            f"--nproc={self.max_processes}",
            f"--nofile={self.max_open_files}",
            "--core=0",
            "--",
            python,
            "-I",
            "-u",
            "-X",
            "faulthandler",
            "-",
        ]
        return [
            *outer,
            "--",
            self.unshare,
            "--user",
            "--map-root-user",
            "--mount",
            "--net",
            "--pid",
            "--ipc",
            "--uts",
            "--cgroup",
            "--fork",
            "--kill-child",
            "--",
            "/bin/sh",
            "-c",
            script,
            "waypoint-sandbox",
            python,
            "-I",
            "-S",
            "-c",
            _INIT_CODE,
            str(status_fd),
            str(stderr_fd),
            *user_code,
        ]

    def _execute(self, code: bytes) -> tuple[RunResult, int | None]:
        """Run the program; return its result and the host uid the sandbox ran as (from its init)."""
        status_r, status_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        started = time.monotonic()
        try:
            try:
                proc = subprocess.Popen(
                    self._command(status_w, stderr_w),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,  # setup and util-linux diagnostics, not the program's
                    pass_fds=(status_w, stderr_w),
                    env=dict(_ENV),
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
                    "stdout": _Stream(proc.stdout.fileno(), cap, kill_on_overflow=True),
                    "stderr": _Stream(stderr_r, cap, kill_on_overflow=True),
                    "status": _Stream(status_r, _STATUS_BYTES),
                    "diagnostics": _Stream(proc.stderr.fileno(), _STATUS_BYTES),
                }
                try:
                    killed_for = _pump(proc, code, streams, started + self.wall_seconds)
                except BaseException:  # e.g. KeyboardInterrupt: never leave the sandbox running
                    _kill_sandbox(proc)
                    raise
                finally:
                    _reap(proc)
        finally:
            os.close(status_r)
            os.close(stderr_r)
        duration = time.monotonic() - started
        return self._result(streams, killed_for, duration)

    def _result(
        self, streams: dict[str, _Stream], killed_for: Limit | None, duration: float
    ) -> tuple[RunResult, int | None]:
        status = _parse_status(streams["status"].text())
        if "ready" not in status:
            if killed_for == "wall":
                raise SandboxSetupError(f"the sandbox did not start within {self.wall_seconds:g} s")
            diagnostics = _tail(streams["diagnostics"].text()) or "no diagnostics"
            raise SandboxSetupError(f"the sandbox could not be set up ({diagnostics})")
        if "execfail" in status:
            raise SandboxSetupError(
                f"the sandboxed interpreter could not be started ({status['execfail']})"
            )
        exit_code: int | None = None
        signame: str | None = None
        cpu: float | None = None
        host_uid: int | None = None
        if "done" in status:
            code_text, cpu_text, uid_text = status["done"].split()
            code, cpu, host_uid = int(code_text), float(cpu_text), int(uid_text)
            if code < 0:
                signame = _signal_name(-code)
            else:
                exit_code = code
        elif killed_for is not None:
            signame = "SIGKILL"
        else:
            raise ToolError(
                "the sandbox supervisor died unexpectedly; the program's outcome is unknown"
            )
        stderr = streams["stderr"].text(truncated_marker=True)
        limit = killed_for or _limit_from_outcome(exit_code, signame, cpu, self.cpu_seconds, stderr)
        result = RunResult(
            exit_code=exit_code,
            signal=signame,
            stdout=streams["stdout"].text(truncated_marker=True),
            stderr=stderr,
            duration=duration,
            limit_hit=limit,
            cpu_seconds=cpu,
        )
        return result, host_uid


_PROBE_LOCK = threading.Lock()
_PROBE_CACHE: dict[tuple[object, ...], tuple[bool, str]] = {}


def _default_python() -> Path:
    """The distribution's interpreter if there is one (it lives in /usr, which the sandbox shows),
    else the base interpreter of the running Python (its prefix is bound read-only)."""
    system = Path("/usr/bin/python3")
    if os.access(system, os.X_OK):
        return system
    return Path(getattr(sys, "_base_executable", None) or sys.executable)


@dataclass
class RootPlan:
    """What the sandbox's root contains: directories, symlinks and small file copies on a tmpfs,
    read-only binds of host directories, device nodes, and empty tmpfs over hidden directories."""

    dirs: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (target, path in the root)
    files: list[tuple[str, str]] = field(default_factory=list)  # (path in the root, text)
    binds: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)


def plan_root(python: Path, hidden: Iterable[Path]) -> RootPlan:
    """Only /usr (and /bin, /lib... when they are not symlinks into it), the interpreter's prefix,
    copies of a few /etc files and five devices are visible; ``hidden`` directories inside those are
    covered. ``python`` must be a resolved path."""
    plan = RootPlan(dirs=["usr", "etc", "dev", "proc", "tmp"], binds=["/usr"])
    for name in _TOP_LEVEL:
        path = Path("/", name)
        if path.is_symlink():
            plan.links.append((os.readlink(path), name))
        elif path.is_dir():
            plan.dirs.append(name)
            plan.binds.append(str(path))
    if not _inside_any(python, plan.binds):
        prefix = python.parent.parent
        plan.dirs.append(str(prefix).lstrip("/"))
        plan.binds.append(str(prefix))
    _plan_etc(plan)
    plan.devices = [f"/dev/{name}" for name in _DEVICES if Path("/dev", name).exists()]
    plan.links += [("/proc/self/fd", "dev/fd"), ("/tmp", "dev/shm")]
    plan.links += [(f"/proc/self/fd/{n}", f"dev/{name}") for n, name in enumerate(_STDIO)]
    for path in hidden:
        path = path.resolve()
        if path.is_dir() and _inside_any(path, plan.binds):
            plan.hidden.append(str(path))
    return plan


def _inside_any(path: Path, roots: list[str]) -> bool:
    return any(path == Path(root) or Path(root) in path.parents for root in roots)


def _plan_etc(plan: RootPlan) -> None:
    etc = Path("/etc")
    localtime = etc / "localtime"
    if localtime.is_symlink():
        plan.links.append((os.readlink(localtime), "etc/localtime"))
    sources = [etc / name for name in _ETC_FILES]
    # Debian's python3 imports sitecustomize from /etc/python3.X; without it every run warns.
    for sub in sorted(etc.glob("python3*")):
        if sub.is_dir() and not sub.is_symlink():
            plan.dirs.append(f"etc/{sub.name}")
            sources += sorted(sub.iterdir())
    for source in sources:
        text = _small_text(source)
        if text is not None:
            plan.files.append((str(source).lstrip("/"), text))


def _small_text(source: Path) -> str | None:
    try:
        if source.is_symlink() or not source.is_file() or source.stat().st_size > _ETC_MAX_BYTES:
            return None
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return None if "\x00" in text else text


def setup_script(plan: RootPlan, tmp_options: str) -> str:
    """The shell script PID 1 runs as root of the new user namespace (host uid nobody): build the
    root on a tmpfs over /tmp, pivot into it, drop the old root, make it read-only, exec "$@"."""
    q = shlex.quote
    lines = [
        "set -eu",
        "mount -t tmpfs -o size=2m,nr_inodes=2048,mode=0755 waypoint-root /tmp",
        "cd /tmp",
        "mkdir -p " + " ".join(q(d) for d in plan.dirs),
    ]
    # `ln -s T1 T2 DIR` names each link after its target, so most links take one exec per directory.
    batched: dict[str, list[str]] = {}
    for target, path in plan.links:
        directory, _, name = path.rpartition("/")
        if name == Path(target).name:
            batched.setdefault(directory or ".", []).append(target)
        else:
            lines.append(f"ln -s {q(target)} {q(path)}")
    for directory, targets in batched.items():
        lines.append(f"ln -s {' '.join(q(t) for t in targets)} {q(directory)}/")
    lines += [f"printf %s {q(text)} > {q(path)}" for path, text in plan.files]
    for source in plan.binds:
        target = q("." + source)
        lines.append(f"mount --bind {q(source)} {target}")
        lines.append(f"mount -o remount,bind,ro,nosuid,nodev {target}")
    for device in plan.devices:
        lines.append(f": > {q('.' + device)}; mount --bind {q(device)} {q('.' + device)}")
    lines += [
        f"mount -t tmpfs -o {_HIDDEN_OPTIONS} waypoint-hidden {q('.' + p)}" for p in plan.hidden
    ]
    lines += [
        f"mount -t tmpfs -o {q(tmp_options)} waypoint-tmp tmp",
        # Without a proc of its own (some containers forbid it) the sandbox simply has no /proc.
        "mount -t proc -o nosuid,nodev,noexec proc proc 2>/dev/null || true",
        # pivot_root(2)'s "new_root == put_old" idiom: the old root lands on top and is detached.
        "pivot_root . .",
        "umount -l .",
        "cd /",
        "mount -o remount,bind,ro,nosuid,nodev /",
        # The user code's own user namespace is the one allowed below this one; no more nesting.
        "if [ -e /proc/sys/user ]; then echo 1 > /proc/sys/user/max_user_namespaces; fi",
        "cd /tmp",
        'exec "$@"',
    ]
    return "\n".join(lines) + "\n"


class _Stream:
    """One pipe from the sandbox, read into a buffer that keeps at most ``cap`` bytes."""

    def __init__(self, fd: int, cap: int, *, kill_on_overflow: bool = False) -> None:
        self.fd = fd
        self.cap = cap
        self.kill_on_overflow = kill_on_overflow
        self.data = bytearray()
        self.overflow = False

    def add(self, chunk: bytes) -> bool:
        """Keep what fits; return True the first time the stream goes over its cap."""
        room = self.cap - len(self.data)
        self.data += chunk[: max(0, room)]
        if len(chunk) <= room or self.overflow:
            return False
        self.overflow = True
        return True

    def text(self, *, truncated_marker: bool = False) -> str:
        text = bytes(self.data).decode("utf-8", errors="replace")
        if self.overflow and truncated_marker:
            text += f"\n[truncated: output exceeded {self.cap} bytes; the rest was discarded]"
        return text


def _pump(
    proc: subprocess.Popen, code: bytes, streams: dict[str, _Stream], deadline: float
) -> Limit | None:
    """Feed the program to stdin and read every stream until all are closed; kill the sandbox at the
    deadline or when stdout or stderr passes its cap, and return which of those happened."""
    assert proc.stdin
    pending = memoryview(code)
    sel = selectors.DefaultSelector()
    stdin_fd = proc.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    sel.register(stdin_fd, selectors.EVENT_WRITE, None)
    for stream in streams.values():
        sel.register(stream.fd, selectors.EVENT_READ, stream)
    killed_for: Limit | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                if killed_for is not None:
                    break  # the namespace is dead; something outside it holds a pipe open
                killed_for = "wall"
                _kill_sandbox(proc)
                deadline = now + _DRAIN_SECONDS
            for key, _ in sel.select(deadline - now):
                if key.data is None:
                    pending = _feed(sel, proc.stdin, pending)
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                elif key.data.add(chunk) and key.data.kill_on_overflow and killed_for is None:
                    killed_for = "output"
                    _kill_sandbox(proc)
                    deadline = time.monotonic() + _DRAIN_SECONDS
    finally:
        sel.close()
        proc.stdin.close()
    return killed_for


def _feed(sel: selectors.BaseSelector, stdin: IO[bytes], pending: memoryview) -> memoryview:
    try:
        written = os.write(stdin.fileno(), pending[:65536])
    except BlockingIOError:
        return pending
    except BrokenPipeError:  # the sandbox died before reading its program
        written = len(pending)
    pending = pending[written:]
    if not pending:
        sel.unregister(stdin.fileno())
        stdin.close()
    return pending


def _kill_sandbox(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's PID 1 (the kernel then kills every process in its PID namespace, daemons
    included); unshare, its parent, reaps it and exits. Killing unshare first would orphan PID 1."""
    init_pids = _children(proc.pid)
    for pid in init_pids:
        _signal(pid, signal.SIGKILL)
    if not init_pids:  # not forked yet: unshare's --kill-child takes PID 1 down with it
        _signal(proc.pid, signal.SIGKILL)


def _reap(proc: subprocess.Popen) -> None:
    try:
        proc.wait(timeout=_DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        _kill_sandbox(proc)
        _signal(proc.pid, signal.SIGKILL)
        proc.wait()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:  # kernel without CONFIG_PROC_CHILDREN: scan every process's parent
        pass
    children = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        # The command name may contain spaces and parentheses; the fields after it do not.
        if stat.rsplit(")", 1)[-1].split()[1] == str(pid):
            children.append(int(entry.name))
    return children


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _parse_status(text: str) -> dict[str, str]:
    status: dict[str, str] = {}
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        status.setdefault(word, rest)
    return status


def _limit_from_outcome(
    exit_code: int | None, signame: str | None, cpu: float | None, cpu_limit: int, stderr: str
) -> Limit | None:
    """Which rlimit ended a program that was not killed by the host (None if it ended by itself)."""
    if exit_code == 0:
        return None
    # A SIGKILL near the CPU limit is the hard limit (soft + 1 s) for a program that ignored
    # SIGXCPU. The kernel's rusage can read up to ~20% low against the limit it enforces.
    if signame == "SIGXCPU" or (
        signame == "SIGKILL" and cpu is not None and cpu >= 0.75 * cpu_limit
    ):
        return "cpu"
    if signame == "SIGXFSZ":
        return "file_size"
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    if last.startswith("MemoryError") or "[Errno 12]" in last:
        return "memory"
    if "[Errno 27]" in last:
        return "file_size"
    if "[Errno 28]" in last:
        return "disk"
    if "[Errno 11]" in last or "can't start new thread" in last:
        return "processes"
    return None


def _judge_probe(result: RunResult, host_uid: int | None) -> tuple[bool, str]:
    if result.exit_code != 0:
        return False, f"the isolation probe failed ({_tail(result.stderr) or result.signal})"
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False, "the isolation probe printed no report"
    if report.get("marker") != _PROBE_MARKER:
        return False, "the isolation probe printed an unexpected report"
    problems = []
    if host_uid is None or host_uid == 0:
        problems.append(f"the sandbox runs as host uid {host_uid}")
    if report["uid"] == 0 or report["euid"] == 0:
        problems.append("code runs as uid 0 inside")
    if report["caps"] is not None and any(report["caps"]):
        problems.append("code keeps capabilities")
    if report.get("nnp") == 0:
        problems.append("no_new_privs is not set")
    if set(report["interfaces"]) - {"lo"}:
        problems.append(f"network interfaces are visible: {report['interfaces']}")
    if report["etc_writable"]:
        problems.append("/etc is writable")
    if report["visible"]:
        problems.append(f"hidden directories are visible: {report['visible']}")
    if set(report["environ"]) - set(_ENV) - {"PWD", "OLDPWD", "LC_CTYPE"}:
        problems.append("the environment leaks variables")
    if problems:
        return False, "isolation is incomplete: " + "; ".join(problems)
    return True, ""


def _encode(code: str) -> bytes:
    try:
        return code.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolInputError(
            "code contains characters that cannot be encoded as UTF-8 (lone surrogates); "
            "remove them and try again"
        ) from None


def _tail(text: str, lines: int = 3) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_LIMIT_TEXT: dict[str, str] = {
    "cpu": "CPU time limit ({cpu} s)",
    "wall": "wall-clock limit ({wall:g} s); the program was killed",
    "memory": "memory limit ({memory} MiB)",
    "file_size": "file size limit ({file_size} MiB per file)",
    "disk": "disk limit ({disk} MiB in /tmp)",
    "output": "output limit ({output} KiB per stream); the program was killed",
    "processes": "process limit ({processes} processes and threads)",
}


def format_result(result: RunResult, sandbox: Sandbox) -> str:
    """The tool's answer: exit status, which limit was hit, then stdout and stderr."""
    status = f"killed by signal {result.signal}" if result.signal else str(result.exit_code)
    limit = "none"
    if result.limit_hit:
        limit = f"{result.limit_hit} — " + _LIMIT_TEXT[result.limit_hit].format(
            cpu=sandbox.cpu_seconds,
            wall=sandbox.wall_seconds,
            memory=sandbox.memory_bytes // MIB,
            file_size=sandbox.file_size_bytes // MIB,
            disk=sandbox.tmpfs_bytes // MIB,
            output=sandbox.output_bytes // KIB,
            processes=sandbox.max_processes,
        )
    return (
        f"exit status: {status}\n"
        f"limit hit: {limit}\n"
        f"stdout:\n{result.stdout or '(empty)'}\n"
        f"stderr:\n{result.stderr or '(empty)'}"
    )


class RunPythonArgs(BaseModel):
    code: str = Field(
        description="A complete Python 3 program (standard library only); print what you need to see."
    )


def make_python_tool(sandbox: Sandbox) -> BaseTool:
    """Build the run_python tool bound to ``sandbox``."""

    def run_python(code: str) -> str:
        """Run a short Python 3 program in an isolated sandbox (no network, no files kept) and return its exit status, stdout and stderr."""
        if len(code) > MAX_CODE_CHARS:
            raise ToolInputError(
                f"the program is {len(code)} characters long; the limit is {MAX_CODE_CHARS}; "
                "send a shorter program"
            )
        if not code.strip():
            raise ToolInputError("the program is empty; send Python source code to run")
        return format_result(sandbox.run(code), sandbox)

    description = (
        f"{run_python.__doc__}\n\nOnly the standard library is available and nothing persists "
        f"between calls; /tmp is writable (up to {sandbox.tmpfs_bytes // MIB} MiB). Limits: "
        f"{sandbox.cpu_seconds} s CPU, {sandbox.wall_seconds:g} s wall clock, "
        f"{sandbox.memory_bytes // MIB} MiB memory, {sandbox.output_bytes // KIB} KiB of output "
        "per stream. A failing program is reported, not raised."
    )
    return StructuredTool.from_function(
        run_python, name="run_python", description=description, args_schema=RunPythonArgs
    )
