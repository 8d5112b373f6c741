"""SIGINT at spread-out moments of a one-shot turn: exit status against whether the answer was
written (stdout) and saved (the thread's export). Usage (from the worktree, PYTHONPATH set):
python docs/notes/users_sigint_measure.py N SECONDS — N turns, the i-th interrupted i/N of SECONDS
after it started. Prints one line per turn and a summary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ANSWER = "6 * 7 = 42"


def one(directory: Path, thread: str, delay: float) -> tuple[int, bool, bool, str]:
    env = {**os.environ, "APP_DB": str(directory / "a.sqlite"), "APP_WORKSPACE": str(directory)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "chat", "-t", thread, "-m", "what is 6 times 7"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    exported = subprocess.run(
        [sys.executable, "-m", "app", "export", "-t", thread, "--format", "md"],
        capture_output=True,
        env=env,
    ).stdout.decode()
    saved = f"**Assistant**\n\n{ANSWER}" in exported
    last = (err.decode().strip().splitlines() or [""])[-1]
    return process.returncode, ANSWER in out.decode(), saved, last


def main() -> None:
    count, seconds = int(sys.argv[1]), float(sys.argv[2])
    outcomes: Counter[tuple[int, bool, bool]] = Counter()
    with tempfile.TemporaryDirectory() as directory:
        for i in range(count):
            code, written, saved, last = one(Path(directory), f"t{i}", seconds * i / count)
            outcomes[(code, written, saved)] += 1
            shown = f"  ({last})" if code not in (0, 130) else ""
            print(f"{seconds * i / count:6.2f}s exit {code} written {written} saved {saved}{shown}")
    print("exit, written, saved: count")
    for (code, written, saved), n in sorted(outcomes.items()):
        print(f"{code}, {written}, {saved}: {n}")
    broken = sum(n for (code, w, s), n in outcomes.items() if code == 0 and not (w and s))
    print(f"exit 0 without the answer written and saved: {broken}")


if __name__ == "__main__":
    main()
