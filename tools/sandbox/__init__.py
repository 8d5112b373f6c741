"""The run_python tool: model-written Python in a throwaway sandbox built from util-linux tools.

Namespaces (user, net, mount, pid, ipc, uts, cgroup), a fresh session keyring and a seccomp filter on
the keyring syscalls, an empty /proc/keys, a minimal read-only root with a size-capped tmpfs on /tmp,
an unprivileged uid, one cgroup per run bounding the whole tree (else rlimits split to the same
total), and a wall-clock kill of the whole namespace. No sandbox, no run.

Modules: ``sandbox`` (Sandbox: settings, probe cache, run), ``probe`` (the isolation probe),
``command`` (the setpriv/unshare/prlimit command and PID 1's code), ``cgroup`` (the tree's bound:
cgroup v2/v1 or the rlimit fallback), ``seccomp`` (the keyring syscall filter PID 1 installs),
``root`` (the root filesystem and its setup script), ``process`` (pipes, deadline, killing the
namespace), ``outcome`` (RunResult), ``limits`` (limit names, units, which rlimit ended a program)
and ``tool`` (run_python).
"""

from tools.sandbox.limits import KIB, MIB, Limit
from tools.sandbox.outcome import RunResult, SandboxSetupError
from tools.sandbox.root import RootPlan, plan_root, setup_script
from tools.sandbox.sandbox import NOBODY, Sandbox
from tools.sandbox.tool import (
    MAX_CODE_CHARS,
    ReadResult,
    RunPythonArgs,
    format_result,
    make_python_tool,
    read_result,
)

__all__ = [
    "KIB",
    "MAX_CODE_CHARS",
    "MIB",
    "NOBODY",
    "Limit",
    "ReadResult",
    "RootPlan",
    "RunPythonArgs",
    "RunResult",
    "Sandbox",
    "SandboxSetupError",
    "format_result",
    "make_python_tool",
    "plan_root",
    "read_result",
    "setup_script",
]
