"""The host command that builds the sandbox: setpriv and unshare for the namespaces, the root setup
script, PID 1's supervisor code (with the keyring seccomp filter it installs) and prlimit's rlimits
for the user code; and the environment it gets.

Nothing here is imported inside the sandbox: PID 1 gets its code as a ``-c`` string, and the program
(the isolation probe too) arrives on stdin.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tools.sandbox.limits import KIB
from tools.sandbox.root import hidden_dirs, plan_root, setup_script
from tools.sandbox.seccomp import keyring_filter, keyring_syscalls

if TYPE_CHECKING:
    from tools.sandbox.cgroup import TreeBounds

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8", "HOME": "/tmp"}

# PID 1 of the sandbox: leaves the host's session keyring for a fresh one and installs the seccomp
# filter (or exits before "ready"), starts the user code (first in line for the OOM killer), reaps
# orphans, and reports how the code ended on the status fd (a pipe only the host reads). When it
# exits the kernel kills whatever is left.
INIT_CODE = r"""
import ctypes, os, signal, sys
fd, err, keyctl, seccomp = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
argv = sys.argv[5:]
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.set_inheritable(fd, False)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def refuse(what):
    sys.exit("waypoint-sandbox: cannot %s: %s" % (what, os.strerror(ctypes.get_errno())))
# The session keyring inherited from the host holds the host's keys: join a new, empty one.
if libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(1), None) < 0:  # KEYCTL_JOIN_SESSION_KEYRING
    refuse("join a fresh session keyring")
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
filters = bytes.fromhex(seccomp)
program = Program(len(filters) // 8, filters)
zero = ctypes.c_ulong(0)
if libc.prctl(38, ctypes.c_ulong(1), zero, zero, zero):  # PR_SET_NO_NEW_PRIVS
    refuse("set no_new_privs")
if libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(program), zero, zero):  # PR_SET_SECCOMP, FILTER
    refuse("install the seccomp filter")
try:
    with open("/proc/self/uid_map") as f:
        host_uid = int(f.read().split()[1])
except (OSError, IndexError, ValueError):
    host_uid = -1
os.write(fd, b"ready\n")
pid = os.fork()
if pid == 0:
    try:
        # A full cgroup's OOM killer then picks the program's tree, never PID 1 or unshare.
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:  # no /proc in this sandbox
        pass
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


# The first process writes itself into the run's cgroup (every hierarchy's cgroup.procs, given
# before "--") before anything forks, so the whole tree is born inside it; a failed write ends it.
JOIN_CGROUP = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class Confinement(Protocol):
    """What the command reads of a Sandbox (tools/sandbox/sandbox.py), which imports this module."""

    python: Path
    hide: tuple[Path, ...]
    setpriv: str
    unshare: str
    prlimit: str
    uid: int
    gid: int
    tmpfs_bytes: int
    cpu_seconds: int
    file_size_bytes: int
    max_open_files: int

    @property
    def bounds(self) -> TreeBounds: ...


def sandbox_command(
    sandbox: Confinement, status_fd: int, stderr_fd: int, cgroup_procs: Sequence[str] = ()
) -> list[str]:
    """The argv that runs a program read from stdin in ``sandbox``; PID 1 reports on ``status_fd``
    and hands ``stderr_fd`` to the program as its stderr. With ``cgroup_procs`` the sandbox starts
    inside that cgroup."""
    python = str(sandbox.python.resolve())
    bounds = sandbox.bounds
    join = ["/bin/sh", "-c", JOIN_CGROUP, "waypoint-cgroup", *cgroup_procs, "--"]
    outer = [sandbox.setpriv, "--no-new-privs", "--pdeathsig=KILL"]
    if os.geteuid() == 0:
        outer += [
            f"--reuid={sandbox.uid}",
            f"--regid={sandbox.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ]
    inodes = max(1024, sandbox.tmpfs_bytes // (4 * KIB))
    tmp_options = f"size={sandbox.tmpfs_bytes},nr_inodes={inodes},mode=1777,nosuid,nodev"
    script = setup_script(plan_root(Path(python), hidden_dirs(sandbox.hide)), tmp_options)
    user_code = [
        # The code gets a nested user namespace in which it is an ordinary uid: exec as non-root
        # leaves it no capabilities and no_new_privs (inherited from the host side) forbids
        # gaining any. The outer root keeps its capabilities until here because mapping itself
        # into the nested namespace needs CAP_SETFCAP there.
        sandbox.setpriv,
        "--no-new-privs",
        "--inh-caps=-all",
        "--",
        sandbox.unshare,
        "--user",
        f"--map-user={sandbox.uid}",
        f"--map-group={sandbox.gid}",
        "--",
        sandbox.prlimit,
        f"--cpu={sandbox.cpu_seconds}:{sandbox.cpu_seconds + 1}",
        f"--as={bounds.process_memory_bytes}",
        f"--fsize={sandbox.file_size_bytes}",
        f"--nproc={bounds.process_rlimit}",
        f"--nofile={sandbox.max_open_files}",
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
        *(join if cgroup_procs else []),
        *outer,
        "--",
        sandbox.unshare,
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
        INIT_CODE,
        str(status_fd),
        str(stderr_fd),
        str(keyring_syscalls()["keyctl"]),
        keyring_filter().hex(),
        *user_code,
    ]
