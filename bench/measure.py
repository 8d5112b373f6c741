"""Small measuring helpers: order statistics, timing, what a SQLite file holds and how large a
turn's messages are as JSON."""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def p95(samples: list[float]) -> float:
    """Nearest-rank 95th percentile (with few samples, the largest)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def timed(action: Callable[[], object]) -> float:
    """Seconds `action()` took."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def median_time(action: Callable[[], object], repeats: int, budget_s: float = 5.0) -> float:
    """Median of up to `repeats` runs; once `budget_s` is spent, no further run starts (a case
    that takes seconds per run is measured fewer times)."""
    samples = [timed(action)]
    while len(samples) < repeats and sum(samples) < budget_s:
        samples.append(timed(action))
    return median(samples)


def bytes_on_disk(db_path: Path) -> int:
    """The database file plus its WAL, as `ls` would show them."""
    wal = db_path.with_name(db_path.name + "-wal")
    return sum(p.stat().st_size for p in (db_path, wal) if p.exists())


def logical_bytes(db_path: Path) -> int:
    """Pages the database holds (committed WAL frames included), independent of WAL folding."""
    with sqlite3.connect(db_path) as connection:
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        size = connection.execute("PRAGMA page_size").fetchone()[0]
    connection.close()
    return pages * size


def row_counts(db_path: Path) -> tuple[int, int]:
    """(checkpoint rows, write rows)."""
    connection = sqlite3.connect(db_path)
    try:
        checkpoints = connection.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
        writes = connection.execute("SELECT COUNT(*) FROM writes").fetchone()[0]
    finally:
        connection.close()
    return checkpoints, writes


def message_json_bytes(messages: list, window: int) -> float:
    """Mean JSON size (langchain `messages_to_dict`) of one turn, over the last `window` turns."""
    from langchain_core.messages import messages_to_dict

    starts = [i for i, m in enumerate(messages) if m.type == "human"]
    if not starts:
        return 0.0
    recent = starts[-window:]
    chunk = messages[recent[0] :]
    return len(json.dumps(messages_to_dict(chunk)).encode()) / len(recent)
