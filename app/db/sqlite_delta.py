"""The DeltaChannel history of a SQLite checkpoint, as LangGraph's SqliteSaver reads it, with every
stored blob decoded (and its messages checked) once per process.

Every run of a turn loads the thread: LangGraph walks from the head back through its ancestors to
the latest snapshot of the messages, decoding each ancestor checkpoint to look for one, then
decodes every message written since. Between two snapshots (100 message updates, ~25 turns) that
is up to ~150 checkpoints and ~100 writes, the same ones turn after turn, and the snapshot itself
holds the whole conversation. Here each is decoded by its stored bytes (app/db/decoded.py):
what was decoded before is not decoded again, and bytes that changed are decoded and checked
afresh. Every load gets its own lists; the messages in them are shared (they are never changed in
place: a changed message is a new one with the same id), except a message without an id, which
`add_messages` gives one in place: a write holding one is decoded every time.

A saver also keeps the histories it loaded (`Loaded`, the last few heads of the threads it ran):
the next turn's walk from the new head stops at the head the previous turn loaded, which is its
ancestor, and takes the rest of the history from there instead of walking and reading the same
rows again. So a session's load reads what was written since its last load, whatever the distance
to the snapshot. Rows of a checkpoint that has a descendant are never changed (LangGraph writes a
step's rows before the next checkpoint; prune and rollback delete or add checkpoints, never change
one), so a kept history stays the history of its checkpoint; what the saver has not loaded itself
(a new saver, another process) is read and checked from the rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, get_checkpoint_id
from langgraph.checkpoint.serde.types import _DeltaSnapshot

try:  # the saver's own steps (a private module): without them, LangGraph's reader is used as it is
    from langgraph.checkpoint.sqlite._delta import (
        DELTA_STAGE1_SQL,
        build_delta_channels_writes_history,
        build_delta_stage2_sql,
        step_walk_with_row,
    )

    AVAILABLE = True
except ImportError:  # pragma: no cover - another langgraph-checkpoint-sqlite
    AVAILABLE = False

from app.db.decoded import ENTRY_BYTES, Decoded, held_bytes
from app.db.raw import MESSAGE_CHANNELS
from app.db.strict import BUILT, check_delta_history

if TYPE_CHECKING:
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.sqlite import SqliteSaver

MiB = 1024 * 1024
# Bounded by what they hold in memory (app/db/decoded.held_bytes), not by the blobs' stored size:
# the bounds hold a long thread's walk (up to ~170 ancestors and ~250 writes back to its
# snapshot) many times over, and serve's memory over 200 threads levels off (4,096 entries each
# held ~12 MB, most of serve's rise over 2,000 runs on 200 threads).
# An ancestor holding no snapshot is kept as the empty mapping: its cost is its key.
CHECKPOINTS = Decoded(entries=4096, max_bytes=1 * MiB)
# One holding a snapshot keeps a whole conversation (its messages shared with
# app/db/strict.SNAPSHOTS, app/db/strict.SharedMessages): as few as that keeps.
SNAPSHOT_CHECKPOINTS = Decoded(entries=8, max_bytes=256 * MiB)
WRITES = Decoded(entries=4096, max_bytes=3 * MiB)
# Each thread's entries are a group of its own in the three: once a walk finds a newer snapshot
# of a thread, what it did not read (the ancestors and writes before that snapshot) goes, since
# no walk from a later head reads them (a walk back to them, time travel, decodes them again).
# Before, a long thread's ~1,700 writes from before its last compaction sat there in serve.
NEWEST_SEEDS: OrderedDict[tuple[str, str], str] = OrderedDict()  # thread -> its newest seed's id
NEWEST_SEEDS_KEPT = 4096
_seeds_lock = threading.Lock()


def delta_history(
    saver: SqliteSaver, config: RunnableConfig, channels: Sequence[str], loaded: Loaded
) -> dict[str, DeltaChannelHistory]:
    """`SqliteSaver.get_delta_channel_history` (langgraph-checkpoint-sqlite 3.1), decoding through
    the caches above and stopping the walk at a checkpoint whose history `loaded` keeps. The seeds'
    messages are checked when decoded, the writes read here before they are returned."""
    if not channels:
        return {}
    channels = tuple(channels)
    thread_id = str(config["configurable"]["thread_id"])
    checkpoint_ns = config["configurable"].get("checkpoint_ns", "")
    checkpoint_id = get_checkpoint_id(config)
    if not checkpoint_id:
        target = saver.get_tuple(config)
        if target is None:
            return {ch: {"writes": []} for ch in channels}
        checkpoint_id = target.config["configurable"]["checkpoint_id"]
    where = (thread_id, checkpoint_ns, channels)
    walk = Walk(channels, checkpoint_id)
    with saver.cursor(transaction=False) as cur:
        cur.execute(
            DELTA_STAGE1_SQL, (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns)
        )
        ancestors = AncestorSeeds(saver.serde, channels, (thread_id, checkpoint_ns))
        for cid, type_tag, blob in cur:
            if walk.step(cid, type_tag, blob, ancestors):
                break
            if cid != checkpoint_id and walk.reaches(loaded.get(where, cid)):
                break
        stage2_rows = walk.writes_rows(cur, saver._has_task_path, thread_id, checkpoint_ns)
    values = WriteValues(saver.serde, (thread_id, checkpoint_ns))
    history = build_delta_channels_writes_history(
        channels=channels,
        chain_by_ch=walk.chain_by_ch,
        seed_val_by_ch=walk.seed_val_by_ch,
        seeded=walk.seeded,
        stage2_rows=stage2_rows,
        serde=values,
    )
    if walk.seed_id is not None:
        forget_before_seed((thread_id, checkpoint_ns), walk.seed_id, ancestors.used | values.used)
    check_delta_history(history, seeds=False)  # the seeds were checked when they were decoded
    history = {ch: joined(walk.earlier.get(ch), entry) for ch, entry in history.items()}
    loaded.keep(where, checkpoint_id, history)
    return history


class Walk:
    """LangGraph's merged walk from a checkpoint through its ancestors (`step_walk_with_row`), which
    may end early at an ancestor whose history is known (`reaches`)."""

    def __init__(self, channels: Sequence[str], target_id: str) -> None:
        self.channels, self.target_id = channels, target_id
        self.chain_by_ch: dict[str, list[str]] = {ch: [] for ch in channels}
        self.seed_val_by_ch: dict[str, Any] = {}
        self.seeded: set[str] = set()
        self.state: dict[str, Any] = {}
        # The history of the known ancestor, for each channel the walk had not found a seed for.
        self.earlier: dict[str, DeltaChannelHistory] = {}
        self.seed_id: str | None = None  # the checkpoint the walk found its last seed in

    def step(self, cid: str, type_tag: str, blob: bytes, serde: Any) -> bool:
        """One row of the walk (the target first); True when it has reached every seed."""
        seeded = len(self.seeded)
        done = self._step(cid, type_tag, blob, serde)
        if len(self.seeded) > seeded:
            self.seed_id = cid
        return done

    def _step(self, cid: str, type_tag: str, blob: bytes, serde: Any) -> bool:
        return step_walk_with_row(
            cid=cid,
            type_tag=type_tag,
            blob=blob,
            target_id=self.target_id,
            serde=serde,
            chain_by_ch=self.chain_by_ch,
            seed_val_by_ch=self.seed_val_by_ch,
            walk_state=self.state,
            seeded=self.seeded,
            channels=self.channels,
        )

    def reaches(self, known: dict[str, DeltaChannelHistory] | None) -> bool:
        """Ends the walk at the ancestor just stepped, whose history is `known`: what the walk has
        not found yet comes from that history (its seed and its writes come before the ancestor's
        own writes, which the walk has)."""
        if known is None or "active" not in self.state:
            return False
        self.earlier = {ch: known[ch] for ch in self.state["active"]}
        return True

    def writes_rows(self, cur: Any, has_task_path: bool, thread_id: str, ns: str) -> list:
        """The rows of the writes of the checkpoints walked (stage 2)."""
        with_chain = [ch for ch in self.channels if self.chain_by_ch[ch]]
        sql = build_delta_stage2_sql(
            has_task_path=has_task_path,
            chain_lens=[len(self.chain_by_ch[ch]) for ch in with_chain],
        )
        if not sql:
            return []
        params: list[Any] = []
        for ch in with_chain:
            params.extend([thread_id, ns, ch, *self.chain_by_ch[ch]])
        cur.execute(sql, params)
        return cur.fetchall()


def forget_before_seed(thread: tuple[str, str], seed_id: str, used: set) -> None:
    """A walk of `thread` found its seed at `seed_id`: when that is the thread's newest yet, drop
    the thread's cached ancestors and writes the walk did not read (from before that seed). Ids
    are LangGraph's time-ordered checkpoint ids; an older seed (time travel) drops nothing."""
    with _seeds_lock:
        newest = NEWEST_SEEDS.get(thread)
        if newest is not None and seed_id <= newest:
            return
        NEWEST_SEEDS[thread] = seed_id
        NEWEST_SEEDS.move_to_end(thread)
        while len(NEWEST_SEEDS) > NEWEST_SEEDS_KEPT:
            NEWEST_SEEDS.popitem(last=False)
    if newest is not None:
        for cache in (CHECKPOINTS, SNAPSHOT_CHECKPOINTS, WRITES):
            cache.drop_group(thread, but=used)


class Loaded:
    """The histories a saver loaded, by thread, namespace, channels and checkpoint: the last
    `entries` loads, held as their own lists (of shared messages), given out as copies. A history
    with a write holding a message without an id is not kept (see WriteValues)."""

    def __init__(self, entries: int = 64) -> None:
        self._histories = Decoded(entries=entries, max_bytes=MiB)  # kept with size 0: by entries

    def get(self, where: tuple, checkpoint_id: str) -> dict[str, DeltaChannelHistory] | None:
        return self._histories.get((*where, checkpoint_id))[1]

    def keep(
        self, where: tuple, checkpoint_id: str, history: dict[str, DeltaChannelHistory]
    ) -> None:
        writes = (value for entry in history.values() for _, _, value in entry["writes"])
        if all(all_have_ids(value) for value in writes):
            kept = {ch: own_history(entry) for ch, entry in history.items()}
            self._histories.keep((*where, checkpoint_id), kept, 0)


def own_history(entry: DeltaChannelHistory) -> DeltaChannelHistory:
    """A history with lists of its own (of the same messages): what is kept, never what is given."""
    return joined(entry, {"writes": []})


def joined(before: DeltaChannelHistory | None, after: DeltaChannelHistory) -> DeltaChannelHistory:
    """`after`'s writes following copies of `before`'s seed and writes (`after` as it is, when
    there is no `before`)."""
    if before is None:
        return after
    entry: DeltaChannelHistory = {
        "writes": [(task, ch, own_copy(value)) for task, ch, value in before["writes"]]
        + after["writes"]
    }
    if "seed" in before:
        entry["seed"] = own_copy(before["seed"])
    return entry


class AncestorSeeds:
    """The `serde` the walk decodes ancestor checkpoints with: of a checkpoint it gives only what
    the walk reads, the values it holds of the walked channels (a snapshot ends the walk)."""

    def __init__(
        self, serde: SerializerProtocol, channels: Sequence[str], thread: tuple[str, str]
    ) -> None:
        self.serde, self.channels, self.thread = serde, tuple(channels), thread
        self.used: set[tuple] = set()  # the keys of what this walk read

    def loads_typed(self, data: tuple[str, bytes]) -> dict[str, Any]:
        type_tag, blob = data
        key = (type_tag, bytes(blob), self.channels)
        self.used.add(key)
        found, held = CHECKPOINTS.get(key)
        if not found:
            found, held = SNAPSHOT_CHECKPOINTS.get(key)
        if not found:
            held = self._decode(data)
            size = ENTRY_BYTES + len(blob) + held_bytes(held)
            (SNAPSHOT_CHECKPOINTS if held else CHECKPOINTS).keep(key, held, size, self.thread)
        return {"channel_values": {ch: own_copy(value) for ch, value in held.items()}}

    def _decode(self, data: tuple[str, bytes]) -> dict[str, Any]:
        values: Mapping[str, Any] = self.serde.loads_typed(data).get("channel_values") or {}
        held = {ch: values[ch] for ch in self.channels if ch in values}
        for channel in MESSAGE_CHANNELS & held.keys():
            BUILT.messages(held[channel], f"the stored {channel}")
        return held


class WriteValues:
    """The `serde` the writes since the snapshot are decoded with."""

    def __init__(self, serde: SerializerProtocol, thread: tuple[str, str]) -> None:
        self.serde, self.thread = serde, thread
        self.used: set[tuple] = set()  # the keys of what this load read

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, blob = data
        key = (type_tag, bytes(blob))
        self.used.add(key)
        found, value = WRITES.get(key)
        if not found:
            value = self.serde.loads_typed(data)
            if all_have_ids(value):
                size = ENTRY_BYTES + len(blob) + held_bytes(value)
                WRITES.keep(key, value, size, self.thread)
        return own_copy(value)


def all_have_ids(value: Any) -> bool:
    """Whether every message of a write has its id (`add_messages` sets a missing one in place)."""
    items = value if isinstance(value, list | tuple) else [value]
    return all(isinstance(getattr(item, "id", None), str) for item in items)


def own_copy(value: Any) -> Any:
    """A kept value as one load may have it: its own list (of the same messages)."""
    if isinstance(value, _DeltaSnapshot):
        return _DeltaSnapshot(own_copy(value.value))
    if isinstance(value, list):
        return list(value)
    return value
