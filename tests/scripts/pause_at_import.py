"""`python -m app ARGS…` that pauses when it first imports MODULE, so a test can press Ctrl-C there.

Usage: python -m tests.scripts.pause_at_import MODULE NOTIFY_FD [ARGS…]. Run with -m, as the real
command is (CPython ends a -m run differently from a script). When the import of MODULE starts, it
writes "paused" to NOTIFY_FD, then blocks reading stdin, which the test never writes to. The pause
runs inside a string exec(), as the code that dataclasses and namedtuples generate does while modules
import: under -m, CPython remembers a KeyboardInterrupt that ended such an exec even once it is
handled, and would end the process by SIGINT instead of the exit status it was given.
"""

from __future__ import annotations

import os
import runpy
import sys

module, notify = sys.argv[1], int(sys.argv[2])


class PauseAt:
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == module:
            sys.meta_path.remove(self)
            os.write(notify, b"paused\n")
            os.close(notify)
            exec("os.read(0, 1)", {"os": os})


sys.meta_path.insert(0, PauseAt())
sys.argv = ["app", *sys.argv[3:]]
runpy.run_module("app", run_name="__main__", alter_sys=True)
