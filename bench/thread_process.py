"""One variant of the long-thread workload in a process of its own: `python -m bench.thread_process
VARIANT DB`. The parent drives every variant turn by turn, interleaved (so machine noise hits them
alike), but their heaps stay apart: in one process the baseline's (its checkpoints of every
message, gigabytes at turn 1,000) made every garbage collection during a Waypoint turn slower, a
cost of the baseline's that was counted as Waypoint's.

Protocol, one JSON line each way: the child prints `{"ready": true}` once set up; then for
`{"turn": TEXT}` it runs the turn and answers `{"seconds": S}` (timed here, so the pipe is not
counted), on the long thread or, with `"thread": NAME`, on a short reference thread (in a
database beside it, so that the long thread's storage figures are its own; its runner is set up
untimed first); for `{"finish": WINDOW}` it answers the figures that
need its runner, closes the runners and exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

from bench.measure import message_json_bytes, timed


def serve(variant: str, db_path: Path) -> None:
    from bench.runners import (
        BaselineRunner,
        GraphRunner,
        SessionRunner,
        head_messages,
        settle_process,
    )

    makers: dict[str, type[SessionRunner | GraphRunner | BaselineRunner]] = {
        "session": SessionRunner,
        "graph": GraphRunner,
        "baseline": BaselineRunner,
    }
    runner = makers[variant](db_path)
    if variant != "baseline":
        settle_process()
    references: dict[str, Any] = {}
    say({"ready": True})
    for line in sys.stdin:
        command = json.loads(line)
        if "turn" in command:
            name = command.get("thread")
            if name and name not in references:
                references[name] = makers[variant](db_path.with_name("reference.sqlite"), name)
            on = references[name] if name else runner
            say({"seconds": timed(partial(on.turn, command["turn"]))})
        elif "finish" in command:
            json_bytes = message_json_bytes(head_messages(runner), command["finish"])
            for each in [runner, *references.values()]:
                each.close()
            say({"message_json_bytes_per_turn": json_bytes})
            return


def say(message: dict) -> None:
    print(json.dumps(message), flush=True)


class ThreadProcess:
    """The parent's handle on one variant's process."""

    def __init__(self, variant: str, db_path: Path, cwd: Path, env: dict[str, str]) -> None:
        self.variant = variant
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.thread_process", variant, str(db_path)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._ask(None)  # its `ready`

    def turn(self, text: str, thread: str | None = None) -> float:
        return self._ask({"turn": text, **({"thread": thread} if thread else {})})["seconds"]

    def finish(self, window: int) -> dict:
        answer = self._ask({"finish": window})
        self.process.wait(timeout=60)
        return answer

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _ask(self, command: dict | None) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        if command is not None:
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the {self.variant} thread process ended (exit {self.process.wait()})"
            )
        return json.loads(line)


if __name__ == "__main__":
    serve(sys.argv[1], Path(sys.argv[2]))
