"""What the guard's database work costs a stored checkpoint on PostgreSQL, alone: the try-lock, the
read of the newest checkpoints and the unlock as three round trips (as before) against the lock and
read pipelined plus the unlock (graphs/shared/writer_locks.py), on one connection, alternating.
Run: python -m tests.scripts.guard_round_trips"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from app.store import open_checkpointer
from graphs.shared.guard_rows import newest_checkpoints
from graphs.shared.writer_locks import TRY_LOCK, UNLOCK, WriterLocks, lock_key
from tests.pg_server import session_server

ROUNDS, WARM_UP = 400, 50


def main() -> None:
    with session_server() as server, open_checkpointer(server.new_database()) as saver:
        key, locks = lock_key("t"), WriterLocks(saver)

        def three_round_trips() -> None:
            with saver.lock:
                saver.conn.execute(TRY_LOCK, (key,)).fetchone()
            newest_checkpoints(saver, "t")
            with saver.lock:
                saver.conn.execute(UNLOCK, (key,)).fetchone()

        def pipelined() -> None:
            with locks.writing("t"):
                pass

        times: dict[Callable[[], None], list[float]] = {three_round_trips: [], pipelined: []}
        for round_number in range(WARM_UP + ROUNDS):
            for way, spent in times.items():
                started = time.perf_counter()
                way()
                if round_number >= WARM_UP:
                    spent.append((time.perf_counter() - started) * 1000)
        for way, spent in times.items():
            print(f"{way.__name__:18} median {statistics.median(spent):.3f} ms")


if __name__ == "__main__":
    main()
