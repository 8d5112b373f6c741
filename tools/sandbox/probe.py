"""The isolation probe: a program run inside the sandbox that reports what it can see (uids,
capabilities, network interfaces, writable /etc, hidden directories, environment), and the judgment
of that report."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tools.sandbox.command import ENV
from tools.sandbox.outcome import RunResult, tail

_PROBE_MARKER = "waypoint-sandbox-probe"

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


def probe_program(hidden: Iterable[Path]) -> bytes:
    """The probe's source, told which directories must look empty or absent."""
    hidden_paths = [str(p) for p in hidden]
    return f"MARKER = {_PROBE_MARKER!r}\nHIDDEN = {hidden_paths!r}\n{_PROBE_CODE}".encode()


def judge_probe(result: RunResult, host_uid: int | None) -> tuple[bool, str]:
    """``(True, "")`` if the probe's report shows complete isolation, else ``(False, reason)``."""
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
    if problems:
        return False, "isolation is incomplete: " + "; ".join(problems)
    return True, ""
