"""The figures in docs/notes/sandbox.md: the issue's 8 children × 300 MiB, a fork bomb and a plain run,
with the cgroup and in the rlimit fallback. Run as root: `PYTHONPATH=. python docs/notes/sandbox_measure.py`."""

import statistics
import time

from tools.sandbox import Sandbox, make_python_tool

CHILDREN = """
import os, time
pids = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        block = bytearray(300 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(1)
        os._exit(0)
    pids.append(pid)
print([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids])
"""
BOMB = """
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

for use_cgroup in (True, False):
    sandbox = Sandbox(use_cgroup=use_cgroup)
    print(sandbox.bounds.describe())
    r = sandbox.run(CHILDREN)
    peak = r.memory_peak_bytes and r.memory_peak_bytes // 2**20
    print(
        f"  children: exit {r.exit_code}, limit {r.limit_hit}, peak {peak} MiB, {r.stdout.strip()}"
    )
    print(f"  MemoryErrors {r.stderr.count('MemoryError')}, {r.duration:.1f} s")
    print("  tool:", make_python_tool(sandbox).invoke({"code": CHILDREN}).splitlines()[:2])
    r = sandbox.run(BOMB)
    print(f"  fork bomb: exit {r.exit_code}, limit {r.limit_hit}, {r.duration:.1f} s")
    times = []
    for _ in range(7):
        started = time.monotonic()
        sandbox.run("print(1)")
        times.append(time.monotonic() - started)
    print(f"  print(1): median {statistics.median(times) * 1000:.0f} ms")
