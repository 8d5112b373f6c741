"""`python -m app ARGS…` that pauses at a named point of a one-shot turn, so a test can press Ctrl-C
exactly there.

Usage: python -m tests.scripts.hold_turn POINT NOTIFY_FD [ARGS…]. POINT is `closing` (the turn is
saved and its renderer is closing: the answer is not yet all written) or `cleanup` (the answer is
written and saved; the runtime, its database and MCP servers, is being closed). At the point it
writes "paused" to NOTIFY_FD, then blocks reading stdin until the test closes it (or a Ctrl-C
interrupts the read).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys

from app.cli import render
from app.service import runtime

point, notify = sys.argv[1], int(sys.argv[2])


def pause() -> None:
    os.write(notify, b"paused\n")
    os.close(notify)
    os.read(0, 1)


def held(original, before: bool):  # type: ignore[no-untyped-def]
    def at_the_point(*args, **kwargs):  # type: ignore[no-untyped-def]
        if before:
            pause()
        result = original(*args, **kwargs)
        if not before:
            pause()
        return result

    return at_the_point


if point == "closing":
    render.ConsoleRenderer._end = held(render.ConsoleRenderer._end, before=True)
elif point == "cleanup":
    opened = runtime.open_runtime

    @contextlib.contextmanager
    def held_runtime(*args, **kwargs):  # type: ignore[no-untyped-def]
        with opened(*args, **kwargs) as it:
            yield it
            pause()

    runtime.open_runtime = held_runtime
else:
    raise SystemExit(f"unknown point {point!r}")
sys.argv = ["app", *sys.argv[3:]]
runpy.run_module("app", run_name="__main__", alter_sys=True)
