"""The concurrency soak: several processes run `chat -m` turns on one database at once, as users
in several terminals do, and nothing that succeeded may be lost.

Each worker process runs TURNS turns through the real `chat` command (in-process, so each turn opens
and closes its own connections, exactly like one `python -m app chat -m` invocation), alternating
between a thread all workers share and a thread of its own. A turn on the shared thread that finds
it busy exits 2 ("thread busy") and is not an error. Afterwards every turn that exited 0 must be in
its thread's history, and a SQLite database must pass `PRAGMA integrity_check`.

`python -m bench.soak DB TURNS INDEX [waypoint|baseline]` is one worker: it prints `ready`, waits for
a line on stdin (so all workers start together), then prints a JSON report of its turns. The
baseline runs the same turns the plain LangGraph way (bench/baseline_cli.py), which has no thread
lock: its concurrent turns on the shared thread all "succeed", and some are lost.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.together import release, start_workers

SHARED_THREAD = "soak-shared"
BUSY = 2


def own_thread(index: int) -> str:
    return f"soak-{index}"


def message(index: int, turn: int) -> str:
    return f"soak {index}.{turn}: what is {index} plus {turn}"


def chat_turn(db: str, thread: str, text: str) -> tuple[int, str]:
    """One `chat -m` turn through the CLI's own entry point: its exit status and the last line it
    printed on stderr (what went wrong, when something did)."""
    from app.__main__ import run

    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        status = run(["chat", "--db", db, "--thread", thread, "--message", text])
    lines = errors.getvalue().strip().splitlines()
    return status, lines[-1] if lines else ""


def baseline_turn(db: str, thread: str, text: str) -> tuple[int, str]:
    """The same turn the plain LangGraph way (bench/baseline_cli.py's `chat`: its own connection,
    `create_react_agent`, streamed); no lock, so a shared thread is never busy."""
    from bench.baseline_cli import chat

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            chat(Path(db), thread, text)
    except Exception as exc:  # counted as a failed turn, as a non-zero exit would be
        return 1, f"{type(exc).__name__}: {exc}"[:300]
    return 0, ""


TURNS = {"waypoint": chat_turn, "baseline": baseline_turn}


def worker(db: str, turns: int, index: int, kind: str = "waypoint") -> dict:
    # imports done before the start line, like a warm process
    import app.cli.main  # noqa: F401
    import bench.baseline_cli  # noqa: F401

    turn_of = TURNS[kind]
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.time()
    outcomes = []
    for turn in range(turns):
        thread = SHARED_THREAD if turn % 2 == 0 else own_thread(index)
        text = message(index, turn)
        status, said = turn_of(db, thread, text)
        outcome = {"thread": thread, "message": text, "status": status}
        outcomes.append(outcome | ({"said": said} if status not in (0, BUSY) else {}))
    return {"start": started, "end": time.time(), "outcomes": outcomes}


@dataclass
class SoakResult:
    kind: str
    processes: int
    turns_per_process: int
    answered: int
    busy: int
    errors: list[dict]
    lost: list[dict]
    integrity: str
    wall_s: float

    @property
    def turns_per_s(self) -> float:
        return self.answered / self.wall_s if self.wall_s else 0.0

    @property
    def clean(self) -> bool:
        return not self.errors and not self.lost and self.integrity == "ok"

    def as_dict(self) -> dict:
        return {**self.__dict__, "turns_per_s": self.turns_per_s, "clean": self.clean}


def soak(
    db: str, processes: int, turns: int, env: dict[str, str], cwd: Path, kind: str = "waypoint"
) -> SoakResult:
    """Run `processes` workers of `turns` turns each on `db` (a SQLite path or a PostgreSQL URL),
    Waypoint's `chat -m` or (`kind="baseline"`, SQLite) the plain LangGraph one."""
    commands = [
        [sys.executable, "-m", "bench.soak", db, str(turns), str(index), kind]
        for index in range(processes)
    ]
    reports = release(start_workers(commands, cwd, env))
    outcomes = [o for r in reports for o in r["outcomes"]]
    answered = [o for o in outcomes if o["status"] == 0]
    verdict = integrity(db)
    return SoakResult(
        kind=kind,
        processes=processes,
        turns_per_process=turns,
        answered=len(answered),
        busy=sum(o["status"] == BUSY and o["thread"] == SHARED_THREAD for o in outcomes),
        errors=[o for o in outcomes if o["status"] != 0 and not _busy(o)],
        # a damaged database cannot show what it kept: every answered turn counts as lost
        lost=missing_turns(kind, db, answered) if verdict == "ok" else answered,
        integrity=verdict,
        wall_s=max(r["end"] for r in reports) - min(r["start"] for r in reports),
    )


def _busy(outcome: dict) -> bool:
    return outcome["status"] == BUSY and outcome["thread"] == SHARED_THREAD


def missing_turns(kind: str, db: str, answered: list[dict]) -> list[dict]:
    """The answered turns whose message is not in their thread's history."""
    kept = {thread: user_messages(kind, db, thread) for thread in {o["thread"] for o in answered}}
    return [o for o in answered if o["message"] not in kept[o["thread"]]]


def user_messages(kind: str, db: str, thread: str) -> set[str]:
    """The user's messages in the thread's head state, read the way the variant reads it."""
    from langchain_core.messages import HumanMessage

    if kind == "baseline":
        from bench.runners import baseline_saver, create_baseline_agent

        saver = baseline_saver(Path(db))
        try:
            state = create_baseline_agent(saver).get_state({"configurable": {"thread_id": thread}})
        finally:
            saver.conn.close()
        messages = state.values.get("messages", [])
    else:
        from app.service.threads import load_state
        from app.store import open_checkpointer
        from graphs.strategies import get_strategy

        with open_checkpointer(db) as saver:
            graph = get_strategy("react").build(saver)
            messages = load_state(graph, thread).values.get("messages", [])
    return {m.text for m in messages if isinstance(m, HumanMessage)}


def integrity(db: str) -> str:
    """SQLite's own verdict on the file ("ok"); a PostgreSQL server keeps its own."""
    if db.startswith(("postgresql://", "postgres://")):
        return "ok"
    try:
        with contextlib.closing(sqlite3.connect(db)) as connection:
            return "; ".join(row[0] for row in connection.execute("PRAGMA integrity_check"))
    except sqlite3.DatabaseError as exc:
        return f"unreadable: {exc}"


if __name__ == "__main__":
    os.environ.setdefault("APP_APPROVE", "never")
    kind = sys.argv[4] if len(sys.argv) > 4 else "waypoint"
    print(json.dumps(worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), kind)), flush=True)
