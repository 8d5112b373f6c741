"""Tests for the Python sandbox: each escape or exhaustion attempt is blocked or contained, nothing
outlives a call, and the tool refuses (never falls back) when isolation cannot be set up."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tools.errors import ToolError, ToolInputError
from tools.sandbox import (
    MAX_CODE_CHARS,
    NOBODY,
    RunResult,
    Sandbox,
    SandboxSetupError,
    format_result,
    make_python_tool,
    plan_root,
    setup_script,
)
from tools.sandbox.cgroup import (
    Hierarchy,
    TreeCgroup,
    find_hierarchies,
    plan_bounds,
    sweep_stale,
    usable_hierarchies,
)
from tools.sandbox.limits import MIB, limit_from_outcome
from tools.sandbox.probe import (
    NAMESPACES,
    HostView,
    host_view,
    judge_bounds,
    judge_probe,
    probe_program,
)
from tools.sandbox.seccomp import keyring_filter

REPO = Path(__file__).resolve().parent.parent

# Small limits keep the file fast; wall clocks are generous because CPU limits count CPU time, which
# a loaded CI machine hands out slowly.
SMALL = {
    "cpu_seconds": 1,
    "wall_seconds": 15,
    "memory_bytes": 256 * 1024 * 1024,
    "file_size_bytes": 2 * 1024 * 1024,
    "max_processes": 8,
    "tmpfs_bytes": 4 * 1024 * 1024,
    "output_bytes": 4096,
}


def sandbox_processes() -> dict[int, str]:
    """Live (non-zombie) processes of the sandbox's host uid, with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = fields.get("Uid", "").split()[:1]
        if uid == [str(NOBODY)] and "Z" not in fields.get("State", ""):
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def processes_with(marker: str) -> list[str]:
    hits = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            hits.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return hits


@pytest.fixture(autouse=True)
def no_survivors() -> Iterator[None]:
    before = set(sandbox_processes())
    yield
    left = {pid: cmd for pid, cmd in sandbox_processes().items() if pid not in before}
    assert left == {}, f"sandbox processes outlived the call: {left}"


@pytest.fixture
def make_sandbox() -> Callable[..., Sandbox]:
    def make(**overrides: object) -> Sandbox:
        sandbox = Sandbox(**{**SMALL, **overrides})  # type: ignore[arg-type]
        ok, reason = sandbox.available()
        assert ok, f"isolation is unavailable on this machine: {reason}"
        return sandbox

    return make


@pytest.fixture
def sandbox(make_sandbox: Callable[..., Sandbox]) -> Sandbox:
    return make_sandbox()


# --- ordinary programs --------------------------------------------------------------------------


def test_hello_world(sandbox: Sandbox) -> None:
    result = sandbox.run("print('hello, world')")
    assert (result.exit_code, result.signal, result.limit_hit) == (0, None, None)
    assert (result.stdout, result.stderr) == ("hello, world\n", "")
    assert result.ok
    assert 0 < result.duration < 10


def test_exception_gives_traceback_and_exit_1(sandbox: Sandbox) -> None:
    result = sandbox.run("def f():\n    raise ValueError('boom')\nf()")
    assert (result.exit_code, result.signal, result.limit_hit) == (1, None, None)
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.endswith("ValueError: boom\n")
    assert not result.ok


def test_segfault_is_reported_as_sigsegv(sandbox: Sandbox) -> None:
    result = sandbox.run("import ctypes\nctypes.string_at(0)")
    assert (result.exit_code, result.signal, result.limit_hit) == (None, "SIGSEGV", None)
    assert "Segmentation fault" in result.stderr  # faulthandler's report


# --- resource limits ----------------------------------------------------------------------------


def test_busy_loop_hits_the_cpu_limit(sandbox: Sandbox) -> None:
    result = sandbox.run("while True:\n    pass")
    assert (result.signal, result.limit_hit) == ("SIGXCPU", "cpu")
    assert result.cpu_seconds is not None and result.cpu_seconds > 0.5  # rusage reads low


def test_ignoring_sigxcpu_still_hits_the_hard_cpu_limit(sandbox: Sandbox) -> None:
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    result = sandbox.run(code)
    assert (result.signal, result.limit_hit) == ("SIGKILL", "cpu")


def test_huge_power_hits_cpu_or_memory_limit(sandbox: Sandbox) -> None:
    result = sandbox.run("x = 10**10**10")
    assert result.limit_hit in ("cpu", "memory")
    assert result.exit_code != 0


def test_sleeping_forever_hits_the_wall_clock(make_sandbox: Callable[..., Sandbox]) -> None:
    sandbox = make_sandbox(wall_seconds=1)
    code = "import subprocess, time\nsubprocess.Popen(['sleep', '600'])\ntime.sleep(600)"
    result = sandbox.run(code)
    assert (result.exit_code, result.signal, result.limit_hit) == (None, "SIGKILL", "wall")
    assert 1 <= result.duration < 5


def test_2_gib_allocation_hits_the_memory_limit(sandbox: Sandbox) -> None:
    result = sandbox.run("x = bytearray(2 * 1024**3)")
    assert (result.exit_code, result.limit_hit) == (1, "memory")
    assert result.stderr.endswith("MemoryError\n")


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_10_mb_of_output_is_truncated_and_marked(sandbox: Sandbox, stream: str) -> None:
    result = sandbox.run(f"import sys\nfor _ in range(10_000):\n    sys.{stream}.write('x' * 1000)")
    text = getattr(result, stream)
    assert result.limit_hit == "output"
    assert text.startswith("x" * 4096 + "\n[truncated")
    assert text.endswith("[truncated: output exceeded 4096 bytes; the rest was discarded]")


def test_invalid_utf8_output_is_replaced_not_fatal(sandbox: Sandbox) -> None:
    result = sandbox.run("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe')")
    assert (result.exit_code, result.stdout) == (0, "ok \ufffd\ufffd")


def test_filling_tmp_stops_at_the_tmpfs_size_and_host_disk_is_untouched(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    name = f"waypoint-fill-{uuid.uuid4().hex}"
    code = f"""
written = 0
try:
    for i in range(1000):
        with open(f"/tmp/{name}-{{i}}", "wb") as f:
            for _ in range(16):
                f.write(b"x" * 65536)
                written += 65536
except OSError as exc:
    print(written, exc.errno)
    raise
"""
    result = sandbox.run(code)
    assert result.limit_hit == "disk"
    written, errno_ = map(int, result.stdout.split())
    assert errno_ == 28  # ENOSPC
    assert written <= SMALL["tmpfs_bytes"]
    for place in (Path("/tmp"), tmp_path, Path("/")):
        assert not list(place.glob(f"{name}*"))


def test_one_huge_file_hits_the_file_size_limit(sandbox: Sandbox) -> None:
    result = sandbox.run("open('/tmp/big', 'wb').write(b'x' * (3 * 1024 * 1024))")
    assert (result.exit_code, result.limit_hit) == (1, "file_size")
    assert "[Errno 27] File too large" in result.stderr


def test_bounded_fork_bomb_is_contained_by_the_process_limit(sandbox: Sandbox) -> None:
    code = """
import os, time
children = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
finally:
    print(children)
"""
    result = sandbox.run(code)
    assert result.limit_hit == "processes"
    assert "BlockingIOError" in result.stderr
    assert int(result.stdout) < SMALL["max_processes"]


# --- the whole tree: one bound for every process --------------------------------------------------

UNPRIVILEGED_UID = 1000
# 6 children each touching 100 MiB: 600 MiB wanted under the 256 MiB of SMALL. A child that gets
# its 100 MiB says so and keeps it; the parent counts those until every child has either said so or
# died, so the count is of blocks held at the same time. Its exit takes the holders down.
CHILDREN_TOUCHING_100_MIB = """
import os, select
ready_r, ready_w = os.pipe()
for _ in range(6):
    if os.fork() == 0:
        block = bytearray(100 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        os.write(ready_w, b"x")
        select.select([], [], [])
os.close(ready_w)
held = dead = 0
while held + dead < 6:
    if select.select([ready_r], [], [], 0.05)[0]:
        held += len(os.read(ready_r, 6))
    while dead < 6 and os.waitpid(-1, os.WNOHANG)[0]:
        dead += 1
print(held)
"""
# Every process forks until refused, then holds its slot for a moment; only the first one reports.
FORK_BOMB = """
import os, time
first = os.getpid()
for _ in range(64):
    try:
        os.fork()
    except BlockingIOError:
        break
if os.getpid() != first:
    time.sleep(0.5)
    os._exit(0)
print("done")
"""
MODES = [
    pytest.param(True, id="cgroup"),
    pytest.param(False, id="rlimit-fallback"),
]


def machine_has_a_cgroup() -> bool:
    return Sandbox(**SMALL).bounds.mode != "rlimit"  # type: ignore[arg-type]


def check_the_tree_bound(result: RunResult, sandbox: Sandbox) -> None:
    """The children together never held more than the sandbox's memory: the cgroup's own peak and
    its OOM kills reported as the limit hit, or in the fallback at most RLIMIT_AS × RLIMIT_NPROC
    (each child's MemoryError is the program's to report: it exited 0)."""
    held = int(result.stdout)  # children that got all their 100 MiB
    assert held * 100 * MIB <= SMALL["memory_bytes"]
    assert result.exit_code == 0
    bounds = sandbox.bounds
    if bounds.mode == "rlimit":
        assert bounds.process_memory_bytes * bounds.max_processes <= SMALL["memory_bytes"]
        assert (held, result.memory_peak_bytes) == (0, None)
        assert result.stderr.count("MemoryError") == 6
    else:
        assert result.limit_hit == "memory", result
        assert format_result(result, sandbox).startswith(
            "exit status: 0\nlimit hit: memory — memory limit (256 MiB for the whole sandbox)\n"
        )
        assert result.memory_peak_bytes is not None
        assert 0 < result.memory_peak_bytes <= SMALL["memory_bytes"]


@pytest.mark.parametrize("use_cgroup", MODES)
def test_children_together_hit_the_memory_limit_of_the_whole_sandbox(
    make_sandbox: Callable[..., Sandbox], use_cgroup: bool
) -> None:
    if use_cgroup and not machine_has_a_cgroup():
        pytest.skip("no cgroup can be made on this machine")
    sandbox = make_sandbox(use_cgroup=use_cgroup, max_processes=16)
    assert sandbox.bounds.mode != "rlimit" if use_cgroup else sandbox.bounds.mode == "rlimit"
    check_the_tree_bound(sandbox.run(CHILDREN_TOUCHING_100_MIB), sandbox)


@pytest.mark.parametrize("use_cgroup", MODES)
def test_fork_bomb_hits_the_process_limit_and_is_reported(
    make_sandbox: Callable[..., Sandbox], use_cgroup: bool
) -> None:
    if use_cgroup and not machine_has_a_cgroup():
        pytest.skip("no cgroup can be made on this machine")
    sandbox = make_sandbox(use_cgroup=use_cgroup)
    result = sandbox.run(FORK_BOMB)
    assert (result.exit_code, result.stdout) == (0, "done\n")
    # Counted by the cgroup though the program ended well; without one, only its own report says.
    assert result.limit_hit == ("processes" if use_cgroup else None), result


def test_busy_children_together_get_at_most_the_sandbox_cpus(
    make_sandbox: Callable[..., Sandbox],
) -> None:
    if not machine_has_a_cgroup():
        pytest.skip("no cgroup can be made on this machine")
    sandbox = make_sandbox(cpus=1)
    code = """
import os, time
start = time.monotonic()
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        while time.process_time() < 0.3:
            pass
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print(os.times().children_user + os.times().children_system, time.monotonic() - start)
"""
    result = sandbox.run(code)
    cpu, wall = map(float, result.stdout.split())
    assert cpu >= 0.85  # the three children did burn their 0.3 s each
    assert cpu / wall <= 1.25  # on one CPU (slack for the quota's 100 ms period), not two


def test_the_cgroup_is_removed_after_each_run(make_sandbox: Callable[..., Sandbox]) -> None:
    if not machine_has_a_cgroup():
        pytest.skip("no cgroup can be made on this machine")
    sandbox = make_sandbox()
    places = [h.path for h in usable_hierarchies()[0]]
    result = sandbox.run(
        "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\nprint(1)"
    )
    assert result.exit_code == 0 and result.memory_peak_bytes  # it ran inside a cgroup
    for place in places:
        assert list(place.glob(f"waypoint-sandbox-{os.getpid()}-*")) == []


def test_cgroups_left_by_a_dead_waypoint_process_are_swept() -> None:
    if not machine_has_a_cgroup():
        pytest.skip("no cgroup can be made on this machine")
    hierarchies = usable_hierarchies()[0]
    ended = subprocess.Popen(["true"])
    ended.wait()  # its pid is free again (and pids are not reused this soon)
    stale = [h.path / f"waypoint-sandbox-{ended.pid}-0000" for h in hierarchies]
    live = [h.path / f"waypoint-sandbox-{os.getpid()}-0000" for h in hierarchies]
    for directory in stale + live:
        directory.mkdir()
    try:
        sweep_stale(hierarchies)
        assert [d.exists() for d in stale + live] == [False] * len(stale) + [True] * len(live)
    finally:
        for directory in stale + live:
            with contextlib.suppress(FileNotFoundError):
                directory.rmdir()


def test_fallback_splits_the_memory_so_the_product_stays_under_it() -> None:
    for memory, processes in ((512 * MIB, 32), (256 * MIB, 8), (64 * MIB, 32), (16 * MIB, 4)):
        bounds, _ = plan_bounds(memory, processes, 1.0, use_cgroup=False)
        assert bounds.mode == "rlimit"
        assert bounds.process_memory_bytes * bounds.max_processes <= memory
        assert 1 <= bounds.max_processes <= min(processes, 8)
    bounds, _ = plan_bounds(512 * MIB, 32, 1.0, use_cgroup=False)
    assert (bounds.max_processes, bounds.process_memory_bytes) == (8, 64 * MIB)
    assert bounds.describe().startswith("rlimit fallback: 8 processes × 64 MiB = 512 MiB at most")


def test_probe_refuses_a_cgroup_that_did_not_hold_the_sandbox() -> None:
    bounds, _ = plan_bounds(256 * MIB, 8, 1.0, use_cgroup=False)
    assert judge_bounds(bounds, charged=False) == (True, "")  # no cgroup to hold it
    v1 = replace(bounds, mode="cgroup v1")
    assert judge_bounds(v1, charged=True) == (True, "")
    assert judge_bounds(v1, charged=False) == (
        False,
        "the sandbox's cgroup (cgroup v1) did not hold its processes",
    )


def test_cgroup_hierarchies_are_found_from_mountinfo_and_membership(tmp_path: Path) -> None:
    unified = tmp_path / "unified"
    (unified / "app").mkdir(parents=True)
    (unified / "app" / "cgroup.controllers").write_text("cpu io memory pids\n")
    mountinfo = f"41 31 0:38 / {unified} rw,relatime - cgroup2 cgroup2 rw\n"
    found = find_hierarchies(mountinfo, "0::/app\n")
    assert [(h.version, h.path) for h in found] == [(2, unified / "app")]
    (unified / "app" / "cgroup.controllers").write_text("hugetlb\n")  # controllers bound to v1
    v1 = (
        f"32 31 0:29 / {tmp_path}/cpu rw - cgroup cgroup rw,cpu,cpuacct\n"
        f"35 31 0:32 / {tmp_path}/memory rw - cgroup cgroup rw,memory\n"
        f"39 31 0:36 / {tmp_path}/pids rw - cgroup cgroup rw,pids\n"
    )
    membership = "8:pids:/\n4:memory:/job/7\n2:cpu,cpuacct:/\n0::/app\n"
    again = "99 31 0:32 / /mnt/memory-again rw - cgroup cgroup rw,memory\n"
    found = find_hierarchies(mountinfo + v1 + again, membership)
    assert {(h.version, str(h.path)) for h in found} == {
        (1, f"{tmp_path}/cpu"),
        (1, f"{tmp_path}/memory/job/7"),
        (1, f"{tmp_path}/pids"),
    }
    assert find_hierarchies(v1.splitlines()[0], membership) == []  # no memory, no pids


def test_v2_cgroup_files_written_and_read(tmp_path: Path) -> None:
    """The cgroup v2 protocol, on a directory standing in for cgroupfs (this machine's v2 hierarchy
    may have no memory controller): the limits written, the events read back as the limit hit."""
    own = Hierarchy(2, frozenset({"cpu", "memory", "pids"}), tmp_path)
    group = TreeCgroup([own])
    group.create(256 * MIB, 8, 0.5)
    (directory,) = group.dirs
    written = {
        name: (directory / name).read_text() for name in ("memory.max", "pids.max", "cpu.max")
    }
    assert written == {"memory.max": "268435456", "pids.max": "10", "cpu.max": "50000 100000"}
    assert group.procs_files == [str(directory / "cgroup.procs")]
    assert group.limit_hit() is None
    (directory / "pids.events").write_text("max 3\n")
    assert group.limit_hit() == "processes"
    (directory / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
    assert group.limit_hit() == "memory"  # memory first: a killed process matters more
    (directory / "cpu.stat").write_text("usage_usec 1200\nuser_usec 1000\n")
    assert group.charged()


def run_as_unprivileged_user(job: Callable[[], object]) -> object:
    """``job()`` in a forked child that dropped to UNPRIVILEGED_UID (its JSON result, or the
    child's error text raised here)."""
    try:
        import pwd

        pwd.getpwuid(UNPRIVILEGED_UID)
    except KeyError:
        pytest.skip(f"no user {UNPRIVILEGED_UID} on this machine")
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(UNPRIVILEGED_UID)
            os.setuid(UNPRIVILEGED_UID)
            os.chdir("/tmp")
            answer = {"ok": job()}
        except BaseException as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_end, json.dumps(answer).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = json.loads(pipe.read() or b'{"error": "no answer"}')
    os.waitpid(pid, 0)
    assert "error" not in answer, answer["error"]
    return answer["ok"]


def test_as_a_non_root_user_children_and_forks_stay_inside_the_bound() -> None:
    def job() -> object:
        sandbox = Sandbox(**{**SMALL, "max_processes": 16})  # type: ignore[arg-type]
        ok, reason = sandbox.available()
        assert ok, reason
        check_the_tree_bound(sandbox.run(CHILDREN_TOUCHING_100_MIB), sandbox)
        bomb = sandbox.run(FORK_BOMB)
        assert (bomb.exit_code, bomb.stdout) == (0, "done\n")
        if sandbox.bounds.mode != "rlimit":
            assert bomb.limit_hit == "processes", bomb
        return sandbox.bounds.mode

    assert run_as_unprivileged_user(job) in ("rlimit", "cgroup v2", "cgroup v1")


def test_proc_keys_lists_none_of_the_users_keys_as_a_non_root_user() -> None:
    def job() -> object:
        description = f"waypoint-test-{uuid.uuid4().hex}"
        keyring_syscall("keyctl", KEYCTL_JOIN_SESSION_KEYRING, None)
        payload = b"secret"
        keyring_syscall(
            "add_key",
            b"user",
            description.encode(),
            payload,
            len(payload),
            KEY_SPEC_SESSION_KEYRING,
        )
        with open("/proc/keys") as keys:
            listed_outside = description in keys.read()
        sandbox = Sandbox(**SMALL)  # type: ignore[arg-type]
        ok, reason = sandbox.available()
        assert ok, reason
        result = sandbox.run(
            "for name in ('/proc/keys', '/proc/key-users'):\n    print(repr(open(name).read()))"
        )
        return [listed_outside, description in result.stdout, result.stdout, result.exit_code]

    listed_outside, listed_inside, stdout, exit_code = run_as_unprivileged_user(job)  # type: ignore[misc]
    assert listed_outside  # the user's own /proc/keys shows the key: the sandbox must not
    assert not listed_inside
    assert (stdout, exit_code) == ("''\n''\n", 0)


def test_proc_keys_is_empty_as_root(sandbox: Sandbox, host_key: tuple[int, str, str]) -> None:
    result = sandbox.run("print(repr(open('/proc/keys').read()))")
    assert (result.stdout, result.exit_code) == ("''\n", 0)


# --- isolation ----------------------------------------------------------------------------------


def test_runs_as_nobody_without_capabilities_or_new_namespaces(sandbox: Sandbox) -> None:
    code = """
import json, os, subprocess
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
nested = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True)
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "cap_eff": int(status["CapEff"], 16), "cap_prm": int(status["CapPrm"], 16),
    "no_new_privs": int(status["NoNewPrivs"]), "nested_userns": nested.returncode,
    "pid": os.getpid(), "cwd": os.getcwd(), "cwd_entries": os.listdir("."),
}))
"""
    report = json.loads(sandbox.run(code).stdout)
    assert (report["uid"], report["gid"]) == (NOBODY, NOBODY)
    assert report["groups"] in ([], [NOBODY])
    assert (report["cap_eff"], report["cap_prm"], report["no_new_privs"]) == (0, 0, 1)
    assert report["nested_userns"] != 0
    assert report["pid"] != 1  # an init is PID 1, so signals and limits behave
    assert (report["cwd"], report["cwd_entries"]) == ("/tmp", [])


def test_writing_etc_or_usr_fails(sandbox: Sandbox) -> None:
    name = f"waypoint-sandbox-{uuid.uuid4().hex}"
    code = f"""
import errno
for path, mode in [("/etc/{name}", "w"), ("/etc/passwd", "a"), ("/usr/{name}", "w"), ("/{name}", "w")]:
    try:
        open(path, mode).close()
        print(path, "WRITTEN")
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
"""
    result = sandbox.run(code)
    assert "WRITTEN" not in result.stdout
    assert len(result.stdout.splitlines()) == 4
    assert not Path("/etc", name).exists() and not Path("/usr", name).exists()
    assert not Path("/", name).exists()


def test_checkpoint_db_workspace_and_cwd_are_not_visible(
    make_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    db = tmp_path / "db" / "agent.sqlite"
    db.parent.mkdir()
    db.write_text("SECRET-CHECKPOINT")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("SECRET-NOTES")
    assert Path.cwd() == tmp_path
    sandbox = make_sandbox(hide=[db.parent, workspace])
    code = f"""
import os
for path in [{str(db)!r}, {str(workspace / "notes.txt")!r}, "/proc/1/root{db}",
             "/proc/self/root{db}", "../../{db}", "/root/.bashrc"]:
    try:
        print(open(path).read())
    except OSError as exc:
        print(path, type(exc).__name__)
print(sorted(os.listdir("/")))
"""
    result = sandbox.run(code)
    assert "SECRET" not in result.stdout
    assert result.stdout.count("Error") == 6
    assert result.exit_code == 0


def test_hidden_directory_inside_a_visible_tree_is_empty(
    make_sandbox: Callable[..., Sandbox],
) -> None:
    target = next(
        p for p in sorted(Path("/usr/share").iterdir()) if p.is_dir() and any(p.iterdir())
    )
    sandbox = make_sandbox(hide=[target])
    result = sandbox.run(f"import os\nprint(os.listdir({str(target)!r}))")
    assert result.stdout == "[]\n"
    assert plan_root(Path("/usr/bin/python3"), [target]).hidden == [str(target)]


def test_secrets_in_the_callers_environment_are_not_visible(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET-KEY")
    code = """
import os
print(sorted(os.environ))
print(os.environ.get("OPENAI_API_KEY"))
for pid in ("1", "self"):
    try:
        print(open(f"/proc/{pid}/environ").read())
    except OSError as exc:
        print(type(exc).__name__)
"""
    result = sandbox.run(code)
    assert "SECRET" not in result.stdout and "OPENAI" not in result.stdout
    assert result.exit_code == 0


def test_loopback_listener_on_the_host_is_unreachable(sandbox: Sandbox) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    print("CONNECTED")
except OSError as exc:
    print(type(exc).__name__, exc.errno)
print(sorted(name for _, name in socket.if_nameindex()))
"""
        result = sandbox.run(code)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert "CONNECTED" not in result.stdout
    assert result.stdout.splitlines()[1] == "['lo']"


def test_setsid_daemon_does_not_outlive_the_call(sandbox: Sandbox) -> None:
    marker = f"waypoint-daemon-{uuid.uuid4().hex}"
    code = f"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", {marker!r}])
    os._exit(0)
for _ in range(200):  # wait until the daemon runs, as seen from inside
    if any({marker!r}.encode() in open(f"/proc/{{p}}/cmdline", "rb").read()
           for p in os.listdir("/proc") if p.isdigit()):
        print("daemon running")
        break
    time.sleep(0.01)
"""
    result = sandbox.run(code)
    assert result.stdout == "daemon running\n"
    assert processes_with(marker) == []


def test_wall_clock_kill_takes_the_whole_tree_down(make_sandbox: Callable[..., Sandbox]) -> None:
    marker = f"waypoint-orphan-{uuid.uuid4().hex}"
    sandbox = make_sandbox(wall_seconds=1.5)
    code = f"""
import os, subprocess, sys, time
for _ in range(3):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {marker!r}],
                     start_new_session=True)
time.sleep(600)
"""
    result = sandbox.run(code)
    assert result.limit_hit == "wall"
    assert processes_with(marker) == []


# --- kernel objects shared with the host ----------------------------------------------------------

# The keyring syscalls' numbers, kept here rather than taken from the code under test.
KEYRING_SYSCALLS = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219},
}
KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_UNLINK = 0, 1, 9
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -5
IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


def keyring_syscall(name: str, *args: object) -> int:
    number = KEYRING_SYSCALLS[os.uname().machine][name]
    result = LIBC.syscall(ctypes.c_long(number), *args)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")
    return result


@pytest.fixture
def host_key() -> Iterator[tuple[int, str, str]]:
    """A "user" key in this process's session keyring: (serial, description, payload)."""
    session = keyring_syscall("keyctl", KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
    user_session = keyring_syscall(
        "keyctl", KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_SESSION_KEYRING, 0
    )
    if session == user_session:  # no session keyring of its own: the user's default stands in
        keyring_syscall("keyctl", KEYCTL_JOIN_SESSION_KEYRING, None)
    description = f"waypoint-test-{uuid.uuid4().hex}".encode()
    payload = f"SECRET-KEY-{uuid.uuid4().hex}".encode()
    serial = keyring_syscall(
        "add_key", b"user", description, payload, len(payload), KEY_SPEC_SESSION_KEYRING
    )
    yield serial, description.decode(), payload.decode()
    keyring_syscall("keyctl", KEYCTL_UNLINK, serial, KEY_SPEC_SESSION_KEYRING)


def test_host_session_keyring_is_out_of_reach(
    sandbox: Sandbox, host_key: tuple[int, str, str]
) -> None:
    serial, description, payload = host_key
    numbers = dict(KEYRING_SYSCALLS[os.uname().machine])
    if os.uname().machine == "x86_64":  # the same call through the x32 ABI
        numbers["x32 keyctl"] = 0x40000000 | numbers["keyctl"]
    code = f"""
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {numbers!r}
buf = ctypes.create_string_buffer(4096)
def call(name, *args):
    n = libc.syscall(NR[name], *args)
    return errno.errorcode[ctypes.get_errno()] if n < 0 else [n, buf.raw[: min(n, 64)].decode("latin-1")]
print(json.dumps({{
    "read @s": call("keyctl", 11, -3, buf, 4096),
    "search @s": call("keyctl", 10, -3, b"user", {description!r}.encode(), 0),
    "read key": call("keyctl", 11, {serial}, buf, 4096),
    "join": call("keyctl", 1, None),
    "add_key": call("add_key", b"user", b"planted", b"x", 1, -3),
    "request_key": call("request_key", b"user", {description!r}.encode(), None, 0),
    **({{"x32 read @s": call("x32 keyctl", 11, -3, buf, 4096)}} if "x32 keyctl" in NR else {{}}),
}}))
print(open("/proc/keys").read())
"""
    result = sandbox.run(code)
    assert payload not in result.stdout and description not in result.stdout
    report = json.loads(result.stdout.splitlines()[0])
    assert report == dict.fromkeys(report, "EPERM")
    assert result.exit_code == 0


def test_host_abstract_unix_socket_is_unreachable(sandbox: Sandbox) -> None:
    name = f"\0waypoint-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        server.listen()
        code = f"""
import socket
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
    try:
        client.connect({name!r})
        print("CONNECTED")
    except OSError as exc:
        print(type(exc).__name__)
print({name[1:]!r} in open("/proc/net/unix").read())
"""
        result = sandbox.run(code)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert result.stdout == "ConnectionRefusedError\nFalse\n"


@pytest.fixture
def host_sysv_objects() -> Iterator[tuple[int, int, int]]:
    """A shared memory segment and a message queue anyone may use: (key, shm id, queue id)."""
    key = uuid.uuid4().int & 0x3FFFFFFF
    LIBC.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
    shm_id = LIBC.shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0o666)
    queue_id = LIBC.msgget(key, IPC_CREAT | IPC_EXCL | 0o666)
    try:
        assert shm_id >= 0 and queue_id >= 0, os.strerror(ctypes.get_errno())
        yield key, shm_id, queue_id
    finally:
        if shm_id >= 0:
            LIBC.shmctl(shm_id, IPC_RMID, None)
        if queue_id >= 0:
            LIBC.msgctl(queue_id, IPC_RMID, None)


def test_host_sysv_ipc_objects_are_invisible(
    sandbox: Sandbox, host_sysv_objects: tuple[int, int, int]
) -> None:
    key, shm_id, queue_id = host_sysv_objects
    assert str(key) in Path("/proc/sysvipc/shm").read_text()  # the host sees them
    code = f"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def outcome(ok):
    print("VISIBLE" if ok else errno.errorcode[ctypes.get_errno()])
outcome(libc.shmget({key}, 0, 0) >= 0)
outcome(libc.msgget({key}, 0) >= 0)
outcome(libc.shmat({shm_id}, None, 0o10000) != ctypes.c_void_p(-1).value)
outcome(libc.msgctl({queue_id}, 2, ctypes.create_string_buffer(256)) >= 0)
for kind in ("shm", "msg", "sem"):
    print(kind, len(open("/proc/sysvipc/" + kind).read().splitlines()) - 1)
"""
    result = sandbox.run(code)
    assert result.stdout == "ENOENT\nENOENT\nEINVAL\nEINVAL\nshm 0\nmsg 0\nsem 0\n"


def test_host_dev_shm_is_not_shared(sandbox: Sandbox) -> None:
    name = f"waypoint-test-{uuid.uuid4().hex}"
    host_file = Path("/dev/shm", name)
    host_file.write_text("SECRET-SHM")
    host_file.chmod(0o644)
    try:
        code = f"""
import os
print(os.listdir("/dev/shm"))
try:
    print(open("/dev/shm/{name}").read())
except OSError as exc:
    print(type(exc).__name__)
open("/dev/shm/{name}-planted", "w").close()
print(os.stat("/dev/shm").st_dev)
"""
        result = sandbox.run(code)
    finally:
        host_file.unlink()
    lines = result.stdout.splitlines()
    assert lines[:2] == ["[]", "FileNotFoundError"]
    assert int(lines[2]) != os.stat("/dev/shm").st_dev
    assert not Path("/dev/shm", f"{name}-planted").exists()


def test_only_stdin_stdout_and_stderr_reach_the_code(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("SECRET-FD")
    leaked = os.open(secret, os.O_RDONLY)  # not close-on-exec, like a careless library's
    os.set_inheritable(leaked, True)
    try:
        code = f"""
import os
open_fds = []
for fd in range(1 << 16):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
print(open_fds)
try:
    print(os.pread({leaked}, 100, 0))
except OSError as exc:
    print(type(exc).__name__)
outcomes = set()
for name in os.listdir("/proc/1/fd"):  # PID 1's status pipe must not be writable from here
    try:
        os.close(os.open("/proc/1/fd/" + name, os.O_WRONLY))
        outcomes.add("OPENED")
    except OSError as exc:
        outcomes.add(type(exc).__name__)
print(outcomes)
"""
        result = sandbox.run(code)
    finally:
        os.close(leaked)
    assert result.stdout == "[0, 1, 2]\nOSError\n{'PermissionError'}\n"


def test_probe_finds_every_kernel_object_channel_closed(sandbox: Sandbox) -> None:
    with host_view() as host:
        result = sandbox.run(probe_program([], host).decode())
    report = json.loads(result.stdout)
    assert report["keyring"] == {"keyctl": "EPERM", "add_key": "EPERM", "request_key": "EPERM"}
    assert report["abstract_socket"] == "ECONNREFUSED"
    assert set(report["namespaces"]) == set(host.namespaces) == set(NAMESPACES)
    for name, inside in report["namespaces"].items():
        assert inside.startswith(f"{name}:[") and inside != host.namespaces[name]
    assert host.dev_shm is not None and report["dev_shm"] not in (None, host.dev_shm)
    assert report["fds"] == []
    assert judge_probe(result, NOBODY, host) == (True, "")


# --- refusing to run ----------------------------------------------------------------------------


@pytest.mark.parametrize("unshare", ["/nonexistent/unshare", "/bin/true"])
def test_unavailable_isolation_refuses_and_never_runs_the_code(
    tmp_path: Path, unshare: str
) -> None:
    marker = tmp_path / "ran"
    sandbox = Sandbox(**SMALL, unshare=unshare)  # type: ignore[arg-type]
    ok, reason = sandbox.available()
    assert not ok and reason
    code = f"open({str(marker)!r}, 'w').write('ran')"
    with pytest.raises(
        ToolError, match=r"^code execution is unavailable on this machine: .*; nothing was run$"
    ):
        sandbox.run(code)
    with pytest.raises(ToolError, match="code execution is unavailable"):
        make_python_tool(sandbox).invoke({"code": code})
    assert not marker.exists()


def test_setup_failure_after_a_good_probe_refuses_too(sandbox: Sandbox, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    broken = Sandbox(**SMALL, hide=["/usr/bin"])  # type: ignore[arg-type]
    assert broken.available() == (True, "")  # cached from `sandbox`: same isolation settings
    with pytest.raises(ToolError, match=r"could not be set up \(.*not found\); nothing was run$"):
        broken.run(f"open({str(marker)!r}, 'w').write('ran')")
    assert not marker.exists()


def test_sandbox_that_cannot_leave_the_host_keyring_refuses(tmp_path: Path) -> None:
    # Waypoint under a seccomp filter that makes keyctl fail, as a kernel without keyrings would:
    # the sandbox's PID 1 cannot join a fresh session keyring, so nothing may run.
    marker = tmp_path / "ran"
    script = f"""
import ctypes, errno, json
from tools.errors import ToolError
from tools.sandbox import Sandbox
from tools.sandbox.seccomp import keyring_filter
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
filters = keyring_filter(error=errno.ENOSYS)
libc = ctypes.CDLL(None, use_errno=True)
zero = ctypes.c_ulong(0)
assert libc.prctl(38, ctypes.c_ulong(1), zero, zero, zero) == 0
program = Program(len(filters) // 8, filters)
assert libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(program), zero, zero) == 0
sandbox = Sandbox(**{SMALL!r})
try:
    sandbox.run("open({str(marker)!r}, 'w').write('ran')")
    error = None
except ToolError as exc:
    error = str(exc)
print(json.dumps([sandbox.available(), error]))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert child.returncode == 0, child.stderr
    (ok, reason), error = json.loads(child.stdout)
    assert not ok
    assert "cannot join a fresh session keyring: Function not implemented" in reason
    assert error == f"code execution is unavailable on this machine: {reason}; nothing was run"
    assert not marker.exists()


def test_keyring_filter_refuses_an_unknown_architecture() -> None:
    with pytest.raises(SandboxSetupError, match="cannot be isolated on riscv64"):
        keyring_filter("riscv64")
    assert len(keyring_filter("aarch64")) == len(keyring_filter("x86_64")) == 10 * 8


HOST = HostView(namespaces={"ipc": "ipc:[1]", "net": "net:[2]"}, dev_shm=27, socket_name="\0x")
CLEAN_REPORT = {
    "marker": "waypoint-sandbox-probe",
    "uid": NOBODY,
    "euid": NOBODY,
    "gid": NOBODY,
    "caps": [0, 0, 0, 0],
    "nnp": 1,
    "interfaces": ["lo"],
    "etc_writable": False,
    "visible": [],
    "environ": ["HOME", "LANG", "PATH"],
    "keyring": {"keyctl": "EPERM", "add_key": "EPERM", "request_key": "EPERM"},
    "abstract_socket": "ECONNREFUSED",
    "namespaces": {"ipc": "ipc:[3]", "net": "net:[4]"},
    "dev_shm": 41,
    "fds": [],
    "key_lists": [],
}


@pytest.mark.parametrize(
    ("leak", "problem"),
    [
        (
            {"keyring": {"keyctl": "ok", "add_key": "EPERM", "request_key": "EPERM"}},
            "the keyring syscalls are not blocked: {'keyctl': 'ok', ",
        ),
        (
            {"keyring": {"keyctl": "ENOSYS", "add_key": "EPERM", "request_key": "EPERM"}},
            "the keyring syscalls are not blocked",
        ),
        ({"abstract_socket": "connected"}, "the host's abstract Unix sockets are reachable"),
        ({"namespaces": {"ipc": "ipc:[1]", "net": "net:[4]"}}, "namespaces are shared: ipc"),
        ({"namespaces": {"ipc": "ipc:[3]", "net": "net:[2]"}}, "namespaces are shared: net"),
        ({"dev_shm": 27}, "/dev/shm is the host's"),
        ({"fds": [3, 251]}, "file descriptors other than 0, 1 and 2 are open: [3, 251]"),
        ({"key_lists": ["/proc/keys"]}, "the kernel's key lists are readable: /proc/keys"),
    ],
)
def test_probe_refuses_a_sandbox_that_shares_a_kernel_object_channel(
    leak: dict[str, object], problem: str
) -> None:
    def judge(report: dict[str, object]) -> tuple[bool, str]:
        return judge_probe(RunResult(0, None, json.dumps(report), "", 0.1, None), NOBODY, HOST)

    assert judge(CLEAN_REPORT) == (True, "")
    assert judge({**CLEAN_REPORT, "namespaces": {"ipc": None, "net": None}}) == (
        True,
        "",
    )  # no /proc
    ok, reason = judge({**CLEAN_REPORT, **leak})
    assert not ok
    assert reason.startswith("isolation is incomplete: ") and problem in reason


# --- the tool -----------------------------------------------------------------------------------


def test_tool_name_schema_and_description(sandbox: Sandbox) -> None:
    tool = make_python_tool(sandbox)
    assert tool.name == "run_python"
    assert list(tool.args) == ["code"]
    assert tool.description.splitlines()[0] == (
        "Run a short Python 3 program in an isolated sandbox (no network, no files kept) and "
        "return its exit status, stdout and stderr."
    )


def test_tool_reports_a_failing_program_as_a_normal_result(sandbox: Sandbox) -> None:
    text = make_python_tool(sandbox).invoke({"code": "print('partial')\n1/0"})
    assert text.startswith("exit status: 1\nlimit hit: none\nstdout:\npartial\n\nstderr:\n")
    assert text.endswith("ZeroDivisionError: division by zero\n")


def test_tool_reports_the_limit_that_was_hit(sandbox: Sandbox) -> None:
    text = make_python_tool(sandbox).invoke({"code": "x = bytearray(2 * 1024**3)"})
    assert text.startswith(
        "exit status: 1\nlimit hit: memory — memory limit (256 MiB for the whole sandbox)\nstdout:\n"
    )
    text = make_python_tool(sandbox).invoke({"code": "import ctypes\nctypes.string_at(0)"})
    assert text.startswith("exit status: killed by signal SIGSEGV\nlimit hit: none\n")


def test_tool_refuses_overlong_or_empty_code(sandbox: Sandbox) -> None:
    tool = make_python_tool(sandbox)
    with pytest.raises(ToolInputError, match=f"limit is {MAX_CODE_CHARS}"):
        tool.invoke({"code": "x = 1\n" * (MAX_CODE_CHARS // 6 + 1)})
    with pytest.raises(ToolInputError, match="empty"):
        tool.invoke({"code": "  \n"})


# --- pure helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exit_code", "signal", "cpu", "stderr", "expected"),
    [
        (0, None, 0.1, "MemoryError\n", None),
        (None, "SIGXCPU", 1.0, "", "cpu"),
        (None, "SIGKILL", 2.0, "", "cpu"),
        (None, "SIGKILL", 0.1, "", None),
        (1, None, 0.1, "Traceback...\nMemoryError\n", "memory"),
        (1, None, 0.1, "OSError: [Errno 28] No space left on device\n", "disk"),
        (1, None, 0.1, "OSError: [Errno 27] File too large\n", "file_size"),
        (
            1,
            None,
            0.1,
            "BlockingIOError: [Errno 11] Resource temporarily unavailable\n",
            "processes",
        ),
        (1, None, 0.1, "RuntimeError: can't start new thread\n", "processes"),
        (1, None, 0.1, "ValueError: MemoryError is not the last line\nKeyError: 1\n", None),
    ],
)
def test_limit_from_outcome(
    exit_code: int | None, signal: str | None, cpu: float, stderr: str, expected: str | None
) -> None:
    assert limit_from_outcome(exit_code, signal, cpu, 1, stderr) == expected


def test_run_result_ok_needs_exit_0_and_no_limit() -> None:
    assert RunResult(0, None, "", "", 0.1, None).ok
    assert not RunResult(0, None, "x", "", 0.1, "output").ok
    assert not RunResult(None, "SIGSEGV", "", "", 0.1, None).ok


def test_root_plan_shows_only_usr_copies_of_etc_and_devices_and_hides_inside_binds() -> None:
    plan = plan_root(Path("/usr/bin/python3"), [Path("/work"), Path("/usr/share"), Path("/")])
    assert plan.binds == ["/usr"] + [f"/{d}" for d in plan.dirs if d in ("bin", "lib", "lib64")]
    assert plan.hidden == ["/usr/share"]  # /work is not visible at all; / is not inside a bind
    assert "/dev/null" in plan.devices
    assert "etc/passwd" in dict(plan.files)


def test_root_plan_binds_an_interpreter_outside_usr_by_its_prefix() -> None:
    plan = plan_root(Path("/opt/py/bin/python3.11"), [Path("/opt/py/lib/secrets")])
    assert "/opt/py" in plan.binds and "opt/py" in plan.dirs


def test_setup_script_quotes_every_path_and_text() -> None:
    plan = plan_root(Path("/usr/bin/python3"), [])
    plan.files.append(("etc/evil", "'; touch /pwned; '"))
    plan.binds.append("/opt/a b")
    script = setup_script(plan, "size=1m")
    assert "printf %s ''\"'\"'; touch /pwned; '\"'\"'' > etc/evil" in script
    assert "mount --bind '/opt/a b' './opt/a b'" in script
    assert script.endswith('exec "$@"\n')
