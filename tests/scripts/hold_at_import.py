"""`python -m app ARGS…` whose first import of MODULE waits until the test opens the FIFO RELEASE
for writing, so a test can see what the program does while that import is held.

Usage: python -m tests.scripts.hold_at_import MODULE RELEASE [ARGS…].
"""

from __future__ import annotations

import runpy
import sys

module, release = sys.argv[1], sys.argv[2]


class HoldAt:
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == module:
            sys.meta_path.remove(self)
            with open(release, "rb"):  # opening a FIFO for reading waits for its writer
                pass


sys.meta_path.insert(0, HoldAt())
sys.argv = ["app", *sys.argv[3:]]
runpy.run_module("app", run_name="__main__", alter_sys=True)
