"""The isolation probe: a program run inside the sandbox that reports what it can see (uids,
capabilities, network interfaces, writable /etc, hidden directories, environment, and the kernel
objects it might share with the host: keyrings, abstract sockets, SysV IPC, /dev/shm, open file
descriptors, /proc/keys), what the host looks like for comparison (HostView), the judgment of the
report, and whether the tree's cgroup, if any, held the probe (judge_bounds)."""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tools.sandbox.cgroup import TreeBounds
from tools.sandbox.command import ENV
from tools.sandbox.outcome import RunResult, tail
from tools.sandbox.seccomp import keyring_syscalls

# The namespaces the sandbox unshares; each must differ from the host's (net isolates abstract Unix
# sockets, ipc SysV IPC objects).
NAMESPACES = ("cgroup", "ipc", "mnt", "net", "pid", "user", "uts")

_PROBE_MARKER = "waypoint-sandbox-probe"

_PROBE_CODE = r"""
import ctypes, errno, json, os, socket
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
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def outcome(result):
    return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
buf = ctypes.create_string_buffer(64)
report["keyring"] = {
    "keyctl": outcome(libc.syscall(KEYRING["keyctl"], 11, -3, buf, 64)),  # KEYCTL_READ of @s
    "add_key": outcome(libc.syscall(KEYRING["add_key"], b"user", b"probe", b"x", 1, -3)),
    "request_key": outcome(libc.syscall(KEYRING["request_key"], b"user", b"probe", None, 0)),
}
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
    try:
        client.connect(HOST_SOCKET)
        report["abstract_socket"] = "connected"
    except OSError as exc:
        report["abstract_socket"] = errno.errorcode.get(exc.errno, "?")
def namespace(name):
    try:
        return os.readlink("/proc/self/ns/" + name)
    except OSError:  # no /proc in this sandbox
        return None
report["namespaces"] = {name: namespace(name) for name in NAMESPACES}
try:
    report["dev_shm"] = os.stat("/dev/shm").st_dev
except OSError:
    report["dev_shm"] = None
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
report["fds"] = [fd for fd in range(3, 1 << 16) if is_open(fd)]
def listed(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
report["key_lists"] = [p for p in ("/proc/keys", "/proc/key-users") if listed(p).strip()]
print(json.dumps(report))
"""


@dataclass(frozen=True)
class HostView:
    """What the probe compares the sandbox with: the host's namespaces (``/proc/self/ns`` links),
    the device of its /dev/shm (None without one) and an abstract Unix socket it listens on."""

    namespaces: dict[str, str]
    dev_shm: int | None
    socket_name: str


@contextmanager
def host_view() -> Iterator[HostView]:
    """The host as the probe must not see it, with the abstract socket listening until exit."""
    namespaces = {}
    for name in NAMESPACES:
        with suppress(OSError):
            namespaces[name] = os.readlink(f"/proc/self/ns/{name}")
    try:
        dev_shm: int | None = os.stat("/dev/shm").st_dev
    except OSError:
        dev_shm = None
    name = f"\0waypoint-sandbox-probe-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(name)
        listener.listen()
        yield HostView(namespaces, dev_shm, name)


def probe_program(hidden: Iterable[Path], host: HostView) -> bytes:
    """The probe's source, told which directories must look empty or absent and which abstract
    socket the host listens on."""
    header = {
        "MARKER": _PROBE_MARKER,
        "HIDDEN": [str(p) for p in hidden],
        "HOST_SOCKET": host.socket_name,
        "KEYRING": keyring_syscalls(),
        "NAMESPACES": list(NAMESPACES),
    }
    lines = [f"{name} = {value!r}" for name, value in header.items()]
    return ("\n".join(lines) + "\n" + _PROBE_CODE).encode()


def judge_probe(result: RunResult, host_uid: int | None, host: HostView) -> tuple[bool, str]:
    """``(True, "")`` if the probe's report shows complete isolation from ``host``, else
    ``(False, reason)``."""
    if result.exit_code != 0:
        return False, f"the isolation probe failed ({tail(result.stderr) or result.signal})"
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
    if set(report["environ"]) - set(ENV) - {"PWD", "OLDPWD", "LC_CTYPE"}:
        problems.append("the environment leaks variables")
    problems += _shared_kernel_objects(report, host)
    if problems:
        return False, "isolation is incomplete: " + "; ".join(problems)
    return True, ""


def judge_bounds(bounds: TreeBounds, charged: bool) -> tuple[bool, str]:
    """``(True, "")`` if the bound in force really held the probe: in a cgroup mode, its cgroup
    must have ``charged`` the probe's run."""
    if bounds.mode == "rlimit" or charged:
        return True, ""
    return False, f"the sandbox's cgroup ({bounds.mode}) did not hold its processes"


def _shared_kernel_objects(report: dict, host: HostView) -> list[str]:
    """What the report shows the code can reach of the host's kernel objects."""
    problems = []
    if report["keyring"] != dict.fromkeys(("keyctl", "add_key", "request_key"), "EPERM"):
        problems.append(f"the keyring syscalls are not blocked: {report['keyring']}")
    if report["abstract_socket"] == "connected":
        problems.append("the host's abstract Unix sockets are reachable")
    # None: the sandbox has no /proc of its own to name them by (unshare made them all the same).
    shared = [
        name
        for name, inside in report["namespaces"].items()
        if inside is not None and inside == host.namespaces.get(name)
    ]
    if shared:
        problems.append(f"the host's namespaces are shared: {', '.join(shared)}")
    if host.dev_shm is not None and report["dev_shm"] == host.dev_shm:
        problems.append("/dev/shm is the host's")
    if report["key_lists"]:
        problems.append(f"the kernel's key lists are readable: {', '.join(report['key_lists'])}")
    if report["fds"]:
        problems.append(f"file descriptors other than 0, 1 and 2 are open: {report['fds']}")
    return problems
