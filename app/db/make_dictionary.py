"""How the preset dictionary d1 (app/db/dictionary.py) was made: from a sample database of a few
offline turns, the raw bytes of the latest checkpoint of each thread and of one write of each kind.
Kept for the record: d1 is frozen, and a new dictionary would be a new file with a new tag.

    export APP_DB=/tmp/zdict/agent.sqlite   # a new, empty database
    waypoint chat --model offline --thread a --strategy react -m "what is 6 times 7"
    ...                                     # and the other SAMPLE_TURNS, in order
    python -m app.db.make_dictionary /tmp/zdict/agent.sqlite app/db/zlib-d1.bin
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import sys
from collections.abc import Iterable
from pathlib import Path

from app.db.compressed import inflated

# The turns of the sample database d1 was built from (`waypoint chat --model offline`).
SAMPLE_TURNS = (
    ("a", "react", "what is 6 times 7"),
    ("a", "react", "weather in Paris and London"),
    ("a", "react", "save 'hello' to notes.txt"),
    ("a", "react", "read notes.txt"),
    ("a", "react", "what is 12 plus 30"),
    ("b", "react", "巴黎的天气怎么样"),
    ("b", "react", "6乘以7等于多少"),
    ("c", "plan", "weather in Paris and Rome, which is warmer? save it to trip.txt"),
    ("d", "reflexion", "read notes.txt"),
    ("e", "routed", "what is 6 times 7"),
)
# Only the last 16 KB of a dictionary reach into a 16 KB window (compressed.WINDOW_BITS); smaller
# dictionaries make every compression cheaper to start, and 8 KB already holds every common name.
MAX_BYTES = 8 * 1024
MESSAGE_CLASS = re.compile(rb"langchain_core\.messages\.(\w+)")


def build(sample_db: Path) -> bytes:
    """A dictionary from a sample database: the raw (inflated) bytes of the latest checkpoint of
    each thread and of one write of each kind, the most common kinds last (zlib finds the end of
    a dictionary cheapest to refer to)."""
    connection = sqlite3.connect(f"file:{sample_db}?mode=ro", uri=True)
    try:
        checkpoints = connection.execute(
            "SELECT type, checkpoint FROM checkpoints c WHERE checkpoint_id = "
            "(SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = c.thread_id) "
            "ORDER BY thread_id DESC"
        ).fetchall()
        writes = connection.execute(
            "SELECT channel, type, value FROM writes ORDER BY checkpoint_id DESC, task_id, idx"
        ).fetchall()
    finally:
        connection.close()
    samples = [inflated(type_, blob)[1] for type_, blob in checkpoints]
    samples += _one_per_kind((channel, *inflated(type_, blob)) for channel, type_, blob in writes)
    return _last_bytes(samples, MAX_BYTES)


def _one_per_kind(writes: Iterable[tuple[str, str, bytes]]) -> list[bytes]:
    """The newest write of each kind (channel; message class; calls tools or not), messages last."""
    chosen: dict[tuple, bytes] = {}
    for channel, _type, data in writes:
        if len(data) >= 64:
            chosen.setdefault(_kind(channel, data), data)
    return sorted(chosen.values(), key=lambda data: MESSAGE_CLASS.search(data) is not None)


def _kind(channel: str, data: bytes) -> tuple:
    message_class = MESSAGE_CLASS.search(data)
    return channel, message_class and message_class.group(1), b"tool_call" in data


def _last_bytes(samples: list[bytes], limit: int) -> bytes:
    kept: list[bytes] = []
    for data in reversed(samples):
        if sum(map(len, kept)) + len(data) > limit:
            break
        kept.append(data)
    return b"".join(reversed(kept))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m app.db.make_dictionary SAMPLE_DB OUT", file=sys.stderr)
        return 2
    data = build(Path(argv[0]))
    Path(argv[1]).write_bytes(data)
    print(f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
