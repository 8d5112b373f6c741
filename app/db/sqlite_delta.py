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
"""

from __future__ import annotations

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

from app.db.decoded import Decoded
from app.db.raw import MESSAGE_CHANNELS
from app.db.strict import BUILT

if TYPE_CHECKING:
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.sqlite import SqliteSaver

MiB = 1024 * 1024
# An ancestor holding no snapshot is kept as the empty mapping: thousands cost little.
CHECKPOINTS = Decoded(entries=4096, max_bytes=8 * MiB)
# One holding a snapshot keeps a whole conversation: as few as app/db/strict.Snapshots keeps.
SNAPSHOT_CHECKPOINTS = Decoded(entries=8, max_bytes=1024 * MiB)
WRITES = Decoded(entries=4096, max_bytes=16 * MiB)


def delta_history(
    saver: SqliteSaver, config: RunnableConfig, channels: Sequence[str]
) -> dict[str, DeltaChannelHistory]:
    """`SqliteSaver.get_delta_channel_history` (langgraph-checkpoint-sqlite 3.1), decoding through
    the caches above. The seeds' messages are checked when decoded; the writes are not checked
    here (app/db/strict.check_delta_history)."""
    if not channels:
        return {}
    channels = list(channels)
    thread_id = str(config["configurable"]["thread_id"])
    checkpoint_ns = config["configurable"].get("checkpoint_ns", "")
    checkpoint_id = get_checkpoint_id(config)
    if not checkpoint_id:
        target = saver.get_tuple(config)
        if target is None:
            return {ch: {"writes": []} for ch in channels}
        checkpoint_id = target.config["configurable"]["checkpoint_id"]

    chain_by_ch: dict[str, list[str]] = {ch: [] for ch in channels}
    seed_val_by_ch: dict[str, Any] = {}
    walk_state: dict[str, Any] = {}
    seeded: set[str] = set()
    ancestors = AncestorSeeds(saver.serde, channels)
    with saver.cursor(transaction=False) as cur:
        cur.execute(
            DELTA_STAGE1_SQL, (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns)
        )
        for cid, type_tag, blob in cur:
            if step_walk_with_row(
                cid=cid,
                type_tag=type_tag,
                blob=blob,
                target_id=checkpoint_id,
                serde=ancestors,
                chain_by_ch=chain_by_ch,
                seed_val_by_ch=seed_val_by_ch,
                walk_state=walk_state,
                seeded=seeded,
                channels=channels,
            ):
                break
        with_chain = [ch for ch in channels if chain_by_ch[ch]]
        stage2_sql = build_delta_stage2_sql(
            has_task_path=saver._has_task_path,
            chain_lens=[len(chain_by_ch[ch]) for ch in with_chain],
        )
        stage2_rows: list = []
        if stage2_sql:
            params: list[Any] = []
            for ch in with_chain:
                params.extend([thread_id, checkpoint_ns, ch, *chain_by_ch[ch]])
            cur.execute(stage2_sql, params)
            stage2_rows = cur.fetchall()

    return build_delta_channels_writes_history(
        channels=channels,
        chain_by_ch=chain_by_ch,
        seed_val_by_ch=seed_val_by_ch,
        seeded=seeded,
        stage2_rows=stage2_rows,
        serde=WriteValues(saver.serde),
    )


class AncestorSeeds:
    """The `serde` the walk decodes ancestor checkpoints with: of a checkpoint it gives only what
    the walk reads, the values it holds of the walked channels (a snapshot ends the walk)."""

    def __init__(self, serde: SerializerProtocol, channels: Sequence[str]) -> None:
        self.serde, self.channels = serde, tuple(channels)

    def loads_typed(self, data: tuple[str, bytes]) -> dict[str, Any]:
        type_tag, blob = data
        key = (type_tag, bytes(blob), self.channels)
        found, held = CHECKPOINTS.get(key)
        if not found:
            found, held = SNAPSHOT_CHECKPOINTS.get(key)
        if not found:
            held = self._decode(data)
            (SNAPSHOT_CHECKPOINTS if held else CHECKPOINTS).keep(key, held, len(blob))
        return {"channel_values": {ch: own_copy(value) for ch, value in held.items()}}

    def _decode(self, data: tuple[str, bytes]) -> dict[str, Any]:
        values: Mapping[str, Any] = self.serde.loads_typed(data).get("channel_values") or {}
        held = {ch: values[ch] for ch in self.channels if ch in values}
        for channel in MESSAGE_CHANNELS & held.keys():
            BUILT.messages(held[channel], f"the stored {channel}")
        return held


class WriteValues:
    """The `serde` the writes since the snapshot are decoded with."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, blob = data
        key = (type_tag, bytes(blob))
        found, value = WRITES.get(key)
        if not found:
            value = self.serde.loads_typed(data)
            if all_have_ids(value):
                WRITES.keep(key, value, len(blob))
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
