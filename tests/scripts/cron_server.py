"""`python -m app serve` whose cron scheduler, having read the due crons, waits at a barrier: lets a
test make two servers race for the same firings (never a sleep).

Usage: cron_server.py BARRIER_DIR [SERVE ARGS…]. After a look that found due crons, the scheduler
writes BARRIER_DIR/seen-<pid> and waits while BARRIER_DIR/hold exists (two minutes at most).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from app.__main__ import main
from app.db.crons import CronTable

barrier = Path(sys.argv[1])
HOLD_AT_MOST = 120.0
real_due_crons = CronTable.due_crons


def due_crons_then_wait(self, now):  # type: ignore[no-untyped-def]
    due = real_due_crons(self, now)
    if due and (barrier / "hold").exists():
        (barrier / f"seen-{os.getpid()}").touch()
        deadline = time.monotonic() + HOLD_AT_MOST
        while (barrier / "hold").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return due


CronTable.due_crons = due_crons_then_wait  # type: ignore[method-assign]
sys.argv = ["app", "serve", *sys.argv[2:]]
main()
