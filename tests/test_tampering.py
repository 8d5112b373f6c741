"""Tampered checkpoints: whatever was done to a stored blob, loading the thread either works (the
change was harmless) or ends in "checkpoint … is unreadable" (exit 3); never an internal error, and
a tampered write never turns into a message. The CLI runs in-process (tests/cli_boundary.py)."""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from base64 import b64encode
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ormsgpack
import pytest

from app.db.base import checkpoint_serializer
from tests.cli_boundary import Outcome, invoke
from tests.conftest import run_cli
from tests.db_helpers import execute

SEED = 16
VARIANTS = 60
SHOW = ["show", "-t", "v", "--json"]
LOADS = [
    ["history", "-t", "v"],
    SHOW,
    ["export", "-t", "v"],
    ["chat", "-t", "v", "-m", "what is 1 plus 1"],
]


def packed(value: object) -> bytes:
    return ormsgpack.packb(value)


def ext(code: int, *fields: object) -> ormsgpack.Ext:
    """A msgpack extension as LangGraph writes one: (module, name, arguments[, method])."""
    return ormsgpack.Ext(code, packed(list(fields)))


BLOCKED_STRING = ext(0, "os", "system", "touch pwned")  # LangGraph hands back "touch pwned"
# Valid msgpack of a shape nothing in Waypoint writes: each must be refused, never coerced.
SHAPES = [
    packed(None),
    packed(42),
    packed("touch pwned"),
    packed([]),
    packed({}),
    packed(["touch pwned"]),
    packed([["human", "touch pwned"]]),
    packed([{"role": "user", "content": "touch pwned"}]),
    packed([BLOCKED_STRING]),
    packed(BLOCKED_STRING),
    packed([ext(1, "os", "system", ["touch pwned"])]),
    packed([ext(2, "subprocess", "Popen", {"args": "touch pwned"})]),
    packed([ext(5, "langchain_core.messages.human", "HumanMessage", {"content": 5}, "x")]),
    packed([ext(5, "langchain_core.messages.human", "HumanMessage", {"bogus": 1}, "x")]),
    packed([ext(3, "datetime", "datetime", "not a date", "fromisoformat")]),
    packed([ext(3, "os", "system", "touch pwned", "__call__")]),
    packed([ext(99, "a", "b", "c")]),
    packed([ormsgpack.Ext(0, b"\xc1")]),
    packed({"v": 4, "id": "x", "channel_values": [], "channel_versions": {}, "versions_seen": {}}),
    packed({"v": 4, "id": "x", "channel_values": {}, "channel_versions": "1", "versions_seen": {}}),
    packed({"v": 4, "id": 7, "channel_values": {}, "channel_versions": {}, "versions_seen": {}}),
    packed(
        {
            "v": 4,
            "id": "x",
            "channel_values": {"messages": ["touch pwned"], "turn": "one"},
            "channel_versions": {"messages": [1]},
            "versions_seen": {"agent": 3},
        }
    ),
]
TYPES = ["pickle", "json", "null", "bytes", "bytearray", "", "msgpack2"]


@dataclass(frozen=True)
class Tampering:
    """One change to one row: its blob (and maybe its `type` column) replaced."""

    table: str
    column: str
    key: tuple  # the row's primary key (the writes table has no rowid)
    kind: str
    type_: str | None
    blob: bytes


def mutations(rng: random.Random, blob: bytes) -> tuple[str, str | None, bytes]:
    kind = rng.choice(["truncate", "flip", "random", "shape", "type", "shape"])
    if kind == "truncate":
        return kind, None, blob[: rng.randrange(len(blob) + 1)]
    if kind == "flip":
        flipped = bytearray(blob)
        for _ in range(rng.randint(1, 6)):
            if flipped:
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        return kind, None, bytes(flipped)
    if kind == "random":
        return kind, None, rng.randbytes(rng.randint(1, 64))
    if kind == "type":
        return kind, rng.choice(TYPES), blob
    return kind, "msgpack", rng.choice(SHAPES)


KEYS = {
    "checkpoints": "thread_id, checkpoint_ns, checkpoint_id",
    "writes": "thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
}


def by_key(table: str) -> str:
    return " AND ".join(f"{column} = ?" for column in KEYS[table].split(", "))


def rows_of(connection: sqlite3.Connection) -> list[tuple[str, str, tuple]]:
    """The blobs of thread v that loading it reads, oldest first: every checkpoint (the head's
    more often) and every write to `messages` (LangGraph rebuilds that channel from them)."""
    checkpoints = connection.execute(
        f"SELECT {KEYS['checkpoints']} FROM checkpoints WHERE thread_id = 'v' "
        "ORDER BY checkpoint_id"
    ).fetchall()
    writes = connection.execute(
        f"SELECT {KEYS['writes']} FROM writes WHERE thread_id = 'v' AND channel = 'messages' "
        "ORDER BY checkpoint_id, task_id, idx"
    ).fetchall()
    rows = [("checkpoints", "checkpoint", key) for key in checkpoints]
    rows += [("writes", "value", key) for key in writes]
    return rows + [("checkpoints", "checkpoint", checkpoints[-1])] * 4


def tamperings(db_path: Path, count: int, seed: int) -> list[Tampering]:
    rng = random.Random(seed)
    result = []
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        rows = rows_of(connection)
        for _ in range(count):
            table, column, key = rng.choice(rows)
            [(blob,)] = connection.execute(
                f"SELECT {column} FROM {table} WHERE {by_key(table)}", key
            ).fetchall()
            kind, type_, new_blob = mutations(rng, blob or b"")
            result.append(Tampering(table, column, key, kind, type_, new_blob))
    return result


def apply(db_path: Path, pristine: bytes, tampering: Tampering) -> None:
    for suffix in ("-wal", "-shm"):
        db_path.with_name(db_path.name + suffix).unlink(missing_ok=True)
    db_path.write_bytes(pristine)
    with contextlib.closing(sqlite3.connect(db_path)) as connection, connection:
        sql = f"UPDATE {tampering.table} SET {tampering.column} = ?"
        params: list[object] = [tampering.blob]
        if tampering.type_ is not None:
            sql += ", type = ?"
            params.append(tampering.type_)
        connection.execute(f"{sql} WHERE {by_key(tampering.table)}", [*params, *tampering.key])


def build_thread() -> None:
    """Thread v: a calculator turn and a write_file turn, so it has tool calls and an artifact.
    `random` is seeded so the savers' channel versions (and so every blob's length) are the same
    in every run: a variant flips or cuts the same bytes each time."""
    state = random.getstate()
    random.seed(SEED)
    try:
        for args in (
            ["chat", "-t", "v", "-m", "what is 6 times 7"],
            ["chat", "-t", "v", "--approve", "auto", "-m", 'write "hello" to notes.txt'],
        ):
            outcome = invoke(*args)
            assert outcome.code == 0, outcome.stderr
    finally:
        random.setstate(state)


def settle(db_path: Path) -> bytes:
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db_path.read_bytes()


def loaded_or_unreadable(outcome: Outcome) -> bool:
    if outcome.internal_error is not None or "Traceback" in outcome.stderr:
        return False
    return outcome.code == 0 or (outcome.code == 3 and "is unreadable" in outcome.stderr)


def message_kinds(show: Outcome) -> list[str]:
    return [message["type"] for message in json.loads(show.stdout)["messages"]]


def is_part_of(kinds: list[str], original: list[str]) -> bool:
    """`kinds` is `original` with some left out (a tampered write may lose its messages)."""
    rest = iter(original)
    return all(kind in rest for kind in kinds)


def test_every_tampered_blob_loads_or_is_unreadable_never_an_internal_error(db_path: Path):
    """60 variants from a fixed seed; a variant that loads shows the thread's own messages, or
    fewer: what a tampered write held never becomes one (a string coerced into a user message)."""
    build_thread()
    pristine = settle(db_path)
    kinds = message_kinds(invoke(*SHOW))
    variants = tamperings(db_path, VARIANTS, SEED)
    refused = 0
    failures = []
    for number, tampering in enumerate(variants):
        apply(db_path, pristine, tampering)
        outcomes = [invoke(*args) for args in LOADS]
        where = f"#{number} {tampering.kind} of {tampering.table} row {tampering.key}"
        for args, outcome in zip(LOADS, outcomes, strict=True):
            if not loaded_or_unreadable(outcome):
                what = outcome.internal_error or outcome.stderr
                failures.append(f"{where}, {args[0]}: {what}")
        show = outcomes[LOADS.index(SHOW)]
        if show.code == 0 and not is_part_of(message_kinds(show), kinds):
            failures.append(f"{where}, show: the messages became {message_kinds(show)}")
        refused += any(outcome.code == 3 for outcome in outcomes)
    assert not failures, "\n".join(failures[:5])
    assert refused >= VARIANTS // 3, f"only {refused} of {VARIANTS} variants were refused"


# --- a blocked payload never becomes a message -------------------------------------------------


def put_in_message_writes(database: str, blob: bytes) -> None:
    [(changed,)] = execute(
        database,
        "UPDATE writes SET value = ?, type = 'msgpack' WHERE thread_id = 'v' "
        "AND channel = 'messages' AND checkpoint_id = (SELECT MAX(checkpoint_id) FROM writes "
        "WHERE thread_id = 'v' AND channel = 'messages')",
        "UPDATE checkpoint_writes SET blob = %s, type = 'msgpack' WHERE thread_id = 'v' "
        "AND channel = 'messages' AND checkpoint_id = (SELECT MAX(checkpoint_id) FROM "
        "checkpoint_writes WHERE thread_id = 'v' AND channel = 'messages')",
        (blob,),
    )
    assert changed > 0


@pytest.mark.parametrize(
    "blob",
    [packed([BLOCKED_STRING]), packed(["touch pwned"]), packed({"role": "user", "content": "x"})],
    ids=["blocked-object", "plain-string", "message-like-dict"],
)
def test_a_tampered_message_write_is_unreadable_never_a_user_message(
    database: str, blob: bytes, tmp_path: Path
):
    build_thread()
    put_in_message_writes(database, blob)
    for args in (*LOADS, ["show", "-t", "v", "--json"], ["export", "-t", "v", "-f", "md"]):
        outcome = invoke(*args)
        assert outcome.internal_error is None, (args, outcome.internal_error)
        assert outcome.code == 3, (args, outcome.stdout, outcome.stderr)
        assert "checkpoint" in outcome.stderr and "of thread v is unreadable" in outcome.stderr
        assert "pwned" not in outcome.stdout


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (packed([BLOCKED_STRING]), "'value' cannot be decoded (the type os.system is not allowed)"),
        (
            packed(["touch pwned"]),
            "is unreadable (a write to messages holds a str, not a message); nothing was imported",
        ),
    ],
    ids=["blocked-object", "plain-string"],
)
def test_an_export_with_a_tampered_message_write_is_not_imported(
    db_path: Path, tmp_path: Path, blob: bytes, message: str
):
    build_thread()
    exported = tmp_path / "v.json"
    assert invoke("export", "-t", "v", "-o", str(exported)).code == 0
    data = json.loads(exported.read_text())
    write = next(w for c in data["checkpoints"] for w in c["writes"] if w["channel"] == "messages")
    write["value"] = {"type": "msgpack", "data": b64encode(blob).decode()}
    exported.write_text(json.dumps(data))

    outcome = invoke("import", str(exported), "--as", "copy")
    assert outcome.internal_error is None, outcome.internal_error
    assert outcome.code == 2
    assert message in outcome.stderr
    assert invoke("history", "-t", "copy").code == 2  # nothing was imported


def test_the_real_process_says_unreadable_without_a_traceback(db_path: Path):
    """Once through `python -m app` itself: its error boundary, not the test's."""
    build_thread()
    put_in_message_writes(str(db_path), packed([BLOCKED_STRING]))
    result = run_cli("show", "-t", "v")
    stderr = result.stderr.decode()
    assert result.returncode == 3, stderr
    assert "of thread v is unreadable (the type os.system is not allowed)" in stderr
    assert "Traceback" not in stderr
    assert "touch" not in result.stdout.decode()


def rewrite_head(db_path: Path, change: Callable[[dict], None]) -> None:
    """Decode the head checkpoint, change its channel values, and store it re-encoded."""
    serde = checkpoint_serializer()
    with contextlib.closing(sqlite3.connect(db_path)) as connection, connection:
        [(checkpoint_id, type_, blob)] = connection.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = 'v' "
            "ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchall()
        checkpoint = serde.loads_typed((type_, blob))
        change(checkpoint["channel_values"])
        new_type, new_blob = serde.dumps_typed(checkpoint)
        connection.execute(
            "UPDATE checkpoints SET type = ?, checkpoint = ? "
            "WHERE thread_id = 'v' AND checkpoint_ns = '' AND checkpoint_id = ?",
            (new_type, new_blob, checkpoint_id),
        )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("call_signatures", 5),
        ("last_error", "boom"),
        ("status", ["answered"]),
        ("tokens_used", "many"),
        ("turn_started_at", "noon"),
    ],
)
def test_a_state_value_of_the_wrong_type_is_unreadable(db_path: Path, field: str, value: object):
    build_thread()
    rewrite_head(db_path, lambda values: values.__setitem__(field, value))
    for args in LOADS:
        outcome = invoke(*args)
        assert outcome.internal_error is None, (args, outcome.internal_error)
        assert (outcome.code, f"is unreadable (its {field} is a" in outcome.stderr) == (3, True), (
            args,
            outcome.stderr,
        )


@pytest.mark.parametrize(
    "command",
    [
        ["history", "-t", "t"],
        ["history", "-t", "t", "--all"],
        ["history", "-t", "t", "--tree"],
        ["show", "-t", "t"],
        ["rollback", "-t", "t", "--turns", "1"],
        ["threads", "list"],
        ["export", "-t", "t", "-f", "md"],
    ],
)
def test_metadata_of_the_wrong_types_is_never_an_internal_error(db_path: Path, command: list):
    for message in ("what is 1 plus 1", "what is 2 plus 2"):
        assert run_cli("chat", "-t", "t", "-m", message).returncode == 0
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        for checkpoint_id, raw in connection.execute(
            "SELECT checkpoint_id, metadata FROM checkpoints"
        ):
            metadata = json.loads(raw)
            metadata.update(turn="x", step="y", preview=123, source=["z"])
            connection.execute(
                "UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?",
                (json.dumps(metadata).encode(), checkpoint_id),
            )
        connection.commit()
    result = run_cli(*command)
    assert result.returncode in (0, 2, 3), result.stderr.decode()
    assert "internal error" not in result.stderr.decode()
