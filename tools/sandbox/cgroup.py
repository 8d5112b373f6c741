"""The bound on the sandbox's whole process tree: one cgroup per run (v2, or v1's memory, pids and
cpu hierarchies) with its memory, process and CPU limits, or, where no cgroup can be made, per-process
rlimits split so that their product stays under the same memory bound (TreeBounds)."""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tools.sandbox.limits import MIB, Limit

Mode = Literal["cgroup v2", "cgroup v1", "rlimit"]

CPU_PERIOD_US = 100_000
# Without a cgroup the tree's memory is RLIMIT_AS × RLIMIT_NPROC: at most this many processes and
# threads, and never less than this much address space each (Python 3.11 starts a thread in 24 MiB).
FALLBACK_MAX_PROCESSES = 8
MIN_PROCESS_BYTES = 32 * MIB
# In the cgroup besides the program's tree: unshare on the host side and the sandbox's PID 1.
TRUSTED_PROCESSES = 2
_REMOVE_SECONDS = 5.0
_PREFIX = "waypoint-sandbox-"  # then the pid of the Waypoint process that made it
SELF_LEAF = "waypoint"  # v2: where this process moves so that its cgroup can have children
_NEEDED = ("memory", "pids")


@dataclass(frozen=True)
class Hierarchy:
    """One cgroup hierarchy the sandbox uses: this process's cgroup directory in it and the
    controllers it carries (in v2, those this directory can hand to a child)."""

    version: int
    controllers: frozenset[str]
    path: Path


@dataclass(frozen=True)
class TreeBounds:
    """What bounds the sandbox as a whole: the mode in force, the tree's memory and its processes and
    threads, each process's address space (RLIMIT_AS) and, in a cgroup, its CPUs."""

    mode: Mode
    memory_bytes: int
    max_processes: int
    process_memory_bytes: int
    cpus: float | None
    reason: str = ""

    @property
    def process_rlimit(self) -> int:
        """RLIMIT_NPROC: the bound itself in the fallback; in a cgroup only a backstop above
        pids.max, so that the cgroup refuses first and counts the refusal in pids.events."""
        if self.mode == "rlimit":
            return self.max_processes
        return self.max_processes + TRUSTED_PROCESSES + 1

    def describe(self) -> str:
        """One line for `doctor` and the docs."""
        memory = self.memory_bytes // MIB
        if self.mode == "rlimit":
            return (
                f"rlimit fallback: {self.max_processes} processes × "
                f"{self.process_memory_bytes // MIB} MiB = {memory} MiB at most, CPU per process "
                f"(no cgroup: {self.reason})"
            )
        cpus = f", {self.cpus:g} CPU" if self.cpus else ""
        return (
            f"{self.mode}: {memory} MiB, {self.max_processes} processes{cpus} for the whole sandbox"
        )


def plan_bounds(
    memory_bytes: int, max_processes: int, cpus: float, *, use_cgroup: bool = True
) -> tuple[TreeBounds, list[Hierarchy]]:
    """The bounds in force for a sandbox of this size, and the hierarchies its cgroups go in (none in
    the rlimit fallback)."""
    hierarchies, reason = usable_hierarchies() if use_cgroup else ([], "turned off")
    if hierarchies:
        mode: Mode = "cgroup v2" if hierarchies[0].version == 2 else "cgroup v1"
        has_cpu = any("cpu" in h.controllers for h in hierarchies)
        bounds = TreeBounds(
            mode, memory_bytes, max_processes, memory_bytes, cpus if has_cpu else None
        )
        return bounds, hierarchies
    processes = max(
        1, min(max_processes, FALLBACK_MAX_PROCESSES, memory_bytes // MIN_PROCESS_BYTES)
    )
    share = memory_bytes // processes
    return TreeBounds("rlimit", share * processes, processes, share, None, reason), []


_DETECT_LOCK = threading.Lock()
_DETECTED: dict[int, tuple[list[Hierarchy], str]] = {}


def usable_hierarchies() -> tuple[list[Hierarchy], str]:
    """The hierarchies a sandbox cgroup can be made in, checked once per effective uid by making
    one; or ``([], why not)``."""
    with _DETECT_LOCK:
        euid = os.geteuid()
        if euid not in _DETECTED:
            _DETECTED[euid] = _detect()
        return _DETECTED[euid]


def _detect() -> tuple[list[Hierarchy], str]:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        membership = Path("/proc/self/cgroup").read_text()
    except OSError as exc:
        return [], f"cannot read /proc/self: {exc.strerror}"
    found = find_hierarchies(mountinfo, membership)
    v2 = [h for h in found if h.version == 2]
    v1 = [h for h in found if h.version == 1]
    without_cpu = [h for h in v1 if h.controllers != {"cpu"}]  # CPU is the one we can do without
    reasons = []
    for candidate in (v2, v1, without_cpu if without_cpu != v1 else []):
        if not candidate:
            continue
        try:
            _check(candidate)
            sweep_stale(candidate)
            return candidate, ""
        except OSError as exc:
            reasons.append(f"{exc.filename}: {exc.strerror}")
    if not reasons:
        return [], "no cgroup hierarchy with the memory and pids controllers is mounted"
    return [], "; ".join(reasons)


def find_hierarchies(mountinfo: str, membership: str) -> list[Hierarchy]:
    """This process's cgroup directories, from /proc/self/mountinfo and /proc/self/cgroup: the
    unified (v2) one if it offers memory and pids, then the v1 hierarchies of memory, pids and cpu
    if memory and pids are both there."""
    paths = {}  # controller names ("" for v2) → this process's cgroup path
    for line in membership.splitlines():
        _, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        paths[frozenset(names.split(",")) if names else frozenset()] = path
    v2: list[Hierarchy] = []
    v1: list[Hierarchy] = []
    mounted: set[str] = set()  # the major:minor of each filesystem seen
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < fields.index("-") + 4:
            continue
        dash = fields.index("-")
        if fields[2] in mounted:  # the same hierarchy mounted again: its cgroups are the same
            continue
        mounted.add(fields[2])
        root, mount_point, fstype = fields[3], fields[4], fields[dash + 1]
        options = set(fields[dash + 3].split(","))
        if fstype == "cgroup2" and frozenset() in paths:
            directory = _inside(mount_point, root, paths[frozenset()])
            controllers = _read_words(directory / "cgroup.controllers") if directory else set()
            if directory and set(_NEEDED) <= controllers:
                v2.append(Hierarchy(2, frozenset(controllers), directory))
        elif fstype == "cgroup":
            wanted = frozenset(options & {"memory", "pids", "cpu"})
            controllers_of = next((n for n in paths if n and n <= options), None)
            directory = (
                _inside(mount_point, root, paths[controllers_of]) if controllers_of else None
            )
            if wanted and directory:
                v1.append(Hierarchy(1, wanted, directory))
    if set(_NEEDED) <= set().union(*(h.controllers for h in v1)):
        return v2 + v1
    return v2


def _inside(mount_point: str, root: str, path: str) -> Path | None:
    """The directory of cgroup ``path`` under a mount of the hierarchy's ``root`` (None when the
    mount does not show it)."""
    root = root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return Path(mount_point, path[len(root) :].lstrip("/"))


def _read_words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _check(hierarchies: list[Hierarchy]) -> None:
    """Make and remove a cgroup with small limits in ``hierarchies``; raises OSError when that fails."""
    for h in hierarchies:
        if h.version == 2:
            _enable_controllers(h)
    group = TreeCgroup(hierarchies)
    try:
        group.create(MIN_PROCESS_BYTES, 1, 1.0)
    finally:
        group.remove()


def sweep_stale(hierarchies: list[Hierarchy]) -> None:
    """Remove the empty cgroups of runs whose Waypoint process died before removing them (a
    cgroup still holding processes cannot be removed, so only empty ones go)."""
    for h in hierarchies:
        for directory in h.path.glob(f"{_PREFIX}*"):
            owner = directory.name[len(_PREFIX) :].split("-")[0]
            if owner.isdigit() and not _alive(int(owner)):
                with suppress(OSError):
                    directory.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _enable_controllers(h: Hierarchy) -> None:
    """Let children of this process's v2 cgroup use the controllers. A cgroup other than the root
    that holds processes cannot (EBUSY: the no-internal-processes rule), so when this process is
    the only one in it (a delegated systemd scope or service) it first moves itself into a leaf,
    as nsjail does; a cgroup shared with other processes is left as it is."""
    wanted = set(_NEEDED) | ({"cpu"} & h.controllers)
    missing = wanted - _read_words(h.path / "cgroup.subtree_control")
    if not missing:
        return
    request = " ".join(f"+{c}" for c in sorted(missing))
    try:
        _write(h.path / "cgroup.subtree_control", request)
        return
    except OSError as exc:
        if exc.errno != errno.EBUSY or _read_words(h.path / "cgroup.procs") != {str(os.getpid())}:
            raise
    leaf = h.path / SELF_LEAF
    with suppress(FileExistsError):
        leaf.mkdir(mode=0o755)
    _write(leaf / "cgroup.procs", str(os.getpid()))
    try:
        _write(h.path / "cgroup.subtree_control", request)
    except OSError:
        with suppress(OSError):  # back where it was, as if never tried
            _write(h.path / "cgroup.procs", str(os.getpid()))
        raise


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None


class TreeCgroup:
    """The cgroup of one run, in every hierarchy: made with its limits before the sandbox starts
    (its launcher writes itself into ``procs_files``), read for the limits hit, emptied and removed."""

    def __init__(self, hierarchies: list[Hierarchy]) -> None:
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.hierarchies = hierarchies
        self.dirs = [h.path / name for h in hierarchies]

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def create(self, memory_bytes: int, max_processes: int, cpus: float) -> None:
        """Make the cgroup and set its limits; raises OSError (after removing what it made)."""
        try:
            for h, directory in zip(self.hierarchies, self.dirs, strict=True):
                try:
                    directory.mkdir(mode=0o755)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, str(h.path)) from None
                self._limit(h, directory, memory_bytes, max_processes + TRUSTED_PROCESSES, cpus)
        except OSError:
            self.remove()
            raise

    def _limit(self, h: Hierarchy, directory: Path, memory: int, pids: int, cpus: float) -> None:
        quota = f"{max(1000, int(cpus * CPU_PERIOD_US))}"
        if h.version == 2:
            _write(directory / "memory.max", str(memory))
            if (directory / "memory.swap.max").exists():
                _write(directory / "memory.swap.max", "0")
            _write(directory / "pids.max", str(pids))
            if "cpu" in h.controllers:
                _write(directory / "cpu.max", f"{quota} {CPU_PERIOD_US}")
            return
        if "memory" in h.controllers:
            _write(directory / "memory.limit_in_bytes", str(memory))
            if (directory / "memory.memsw.limit_in_bytes").exists():  # swap too, where accounted
                _write(directory / "memory.memsw.limit_in_bytes", str(memory))
        if "pids" in h.controllers:
            _write(directory / "pids.max", str(pids))
        if "cpu" in h.controllers:
            _write(directory / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(directory / "cpu.cfs_quota_us", quota)

    def limit_hit(self) -> Limit | None:
        """ "memory" when the kernel killed a process of the tree for memory, "processes" when a
        fork or thread was refused at the process limit, else None."""
        for h, directory in zip(self.hierarchies, self.dirs, strict=True):
            events = directory / ("memory.events" if h.version == 2 else "memory.oom_control")
            if "memory" in h.controllers and _counter(events, "oom_kill") > 0:
                return "memory"
        for h, directory in zip(self.hierarchies, self.dirs, strict=True):
            if "pids" in h.controllers and _counter(directory / "pids.events", "max") > 0:
                return "processes"
        return None

    def memory_peak(self) -> int | None:
        """The most memory the tree held at once (None where the kernel does not say)."""
        for h, directory in zip(self.hierarchies, self.dirs, strict=True):
            if "memory" in h.controllers:
                name = "memory.peak" if h.version == 2 else "memory.max_usage_in_bytes"
                with suppress(OSError, ValueError):
                    return int((directory / name).read_text())
        return None

    def charged(self) -> bool:
        """Whether the cgroup accounted for any of the run (a launcher that never joined it leaves
        it untouched): CPU time in v2's cpu.stat, which every v2 cgroup has, or v1's memory peak."""
        for h, directory in zip(self.hierarchies, self.dirs, strict=True):
            if h.version == 2 and _counter(directory / "cpu.stat", "usage_usec") > 0:
                return True
            if h.version == 1 and "memory" in h.controllers:
                return (self.memory_peak() or 0) > 0
        return False

    def remove(self) -> None:
        """Kill whatever is left in the cgroup and remove it (bounded; a cgroup that will not go is
        left behind rather than blocking the caller)."""
        deadline = time.monotonic() + _REMOVE_SECONDS
        for directory in self.dirs:
            while directory.exists() and time.monotonic() < deadline:
                for pid in _read_words(directory / "cgroup.procs"):
                    with suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.01)  # the killed processes are still exiting


def _counter(path: Path, name: str) -> int:
    """The value of ``name`` in a flat-keyed cgroup file ("oom_kill 2\n..."), 0 when absent."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0
