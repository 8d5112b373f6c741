"""A thread's DeltaChannel history read from SQLite (app/db/sqlite_delta.py): exactly LangGraph's,
each stored blob decoded and checked once, and bytes that changed decoded and checked again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver

from app.db import sqlite_delta
from app.db.decoded import Decoded
from app.db.unreadable import UnreadableCheckpointError
from app.store import open_checkpointer
from tests.test_delta_storage import run_turns

CHANNELS = ["messages"]


@pytest.fixture(scope="module")
def thread_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A thread past its first snapshot of the messages (100 updates, 27 turns here)."""
    db = tmp_path_factory.mktemp("delta") / "agent.sqlite"
    run_turns(db, "t", [f"what is {n} plus {n}" for n in range(30)])
    return db


def checkpoint_configs(saver: SqliteSaver) -> list[dict]:
    return [item.config for item in saver.list({"configurable": {"thread_id": "t"}})]


def plain(history: dict) -> dict:
    """A history as comparable data: seeds and writes as (type, id, content) of each message."""

    def messages(value: object) -> list:
        value = value.value if isinstance(value, _DeltaSnapshot) else value
        items = value if isinstance(value, list) else [value]
        return [(m.type, m.id, m.content) for m in items]

    return {
        channel: {
            "seed": messages(entry["seed"]) if "seed" in entry else None,
            "writes": [(task, ch, messages(value)) for task, ch, value in entry["writes"]],
        }
        for channel, entry in history.items()
    }


def test_the_installed_sqlite_saver_has_the_steps_the_cached_reader_uses():
    """Otherwise the saver falls back to LangGraph's own reader: correct, but every load decodes
    its whole chain again (the flatness the benchmark measures)."""
    from app.db import sqlite_delta

    assert sqlite_delta.AVAILABLE


def test_the_history_is_langgraphs_own_at_every_checkpoint(thread_db: Path):
    with open_checkpointer(thread_db) as saver:
        configs = checkpoint_configs(saver)
        seeded = 0
        for config in configs:
            expected = plain(
                SqliteSaver.get_delta_channel_history(saver, config=config, channels=CHANNELS)
            )
            seeded += expected["messages"]["seed"] is not None
            for _ in range(2):  # decoded, then kept
                assert (
                    plain(saver.get_delta_channel_history(config=config, channels=CHANNELS))
                    == expected
                )
        head = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}  # no id: the head's
        assert plain(saver.get_delta_channel_history(config=head, channels=CHANNELS)) == plain(
            SqliteSaver.get_delta_channel_history(saver, config=head, channels=CHANNELS)
        )
    assert seeded > 0 and len(configs) > 100


def test_each_load_gets_its_own_lists_of_the_same_messages(thread_db: Path):
    with open_checkpointer(thread_db) as saver:
        config = next(
            c
            for c in checkpoint_configs(saver)
            if "seed" in saver.get_delta_channel_history(config=c, channels=CHANNELS)["messages"]
            and saver.get_delta_channel_history(config=c, channels=CHANNELS)["messages"]["writes"]
        )
        first, again = (
            saver.get_delta_channel_history(config=config, channels=CHANNELS)["messages"]
            for _ in range(2)
        )
    assert first["seed"].value is not again["seed"].value
    assert all(a is b for a, b in zip(first["seed"].value, again["seed"].value, strict=True))
    for (_, _, one), (_, _, two) in zip(first["writes"], again["writes"], strict=True):
        assert one is not two and one == two and all(a is b for a, b in zip(one, two, strict=True))


def counting_walk_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The checkpoint ids the delta walks step through, from now on."""
    stepped: list[str] = []
    step = sqlite_delta.Walk.step

    def counted(walk: sqlite_delta.Walk, cid: str, *args: object) -> bool:
        stepped.append(cid)
        return step(walk, cid, *args)

    monkeypatch.setattr(sqlite_delta.Walk, "step", counted)
    return stepped


def test_each_load_walks_back_only_to_the_checkpoint_loaded_before_it(
    thread_db: Path, monkeypatch: pytest.MonkeyPatch
):
    """A saver keeps the histories it loaded: a load of a descendant walks to the nearest one it
    kept and takes the rest from it, and still gives exactly LangGraph's history."""
    with open_checkpointer(thread_db) as saver:
        oldest_first = checkpoint_configs(saver)[::-1]
        stepped = counting_walk_steps(monkeypatch)
        for config in oldest_first:
            expected = SqliteSaver.get_delta_channel_history(
                saver, config=config, channels=CHANNELS
            )
            del stepped[:]
            loaded = saver.get_delta_channel_history(config=config, channels=CHANNELS)
            assert plain(loaded) == plain(expected)
            assert len(stepped) <= 2  # the checkpoint itself, then its parent (loaded before)
    with open_checkpointer(thread_db) as fresh:  # another saver walks the rows itself
        del stepped[:]
        fresh.get_delta_channel_history(config=oldest_first[-1], channels=CHANNELS)
        assert len(stepped) > 2


def test_a_load_on_another_branch_walks_its_own_ancestors(tmp_path: Path):
    """A branch made from an older checkpoint (a rollback, a fork) shares only that checkpoint's
    ancestors with the branch loaded before: its own checkpoints are walked and read."""
    db = tmp_path / "agent.sqlite"
    run_turns(db, "t", [f"what is {n} plus {n}" for n in range(6)])
    with open_checkpointer(db) as saver:
        first_branch = checkpoint_configs(saver)
        head = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        saver.get_delta_channel_history(config=head, channels=CHANNELS)
        fork_at = first_branch[len(first_branch) // 2]
        fork_turn(saver, fork_at, "what is 7 times 6")
        for config in (head, first_branch[0], head):
            expected = SqliteSaver.get_delta_channel_history(
                saver, config=config, channels=CHANNELS
            )
            assert plain(saver.get_delta_channel_history(config=config, channels=CHANNELS)) == (
                plain(expected)
            )
        assert checkpoint_configs(saver)[0] != first_branch[0]  # the head is the fork's


def fork_turn(saver: SqliteSaver, at: dict, text: str) -> None:
    from app.config import load_settings
    from app.models.offline import OfflineChatModel
    from graphs.react.graph import build_graph
    from graphs.state import AgentContext, turn_input
    from tools import default_tools

    settings = load_settings(db=Path(saver.conn.execute("PRAGMA database_list").fetchone()[2]))
    context = AgentContext(model=OfflineChatModel(), tools=default_tools(settings.workspace))
    build_graph(saver).invoke(
        turn_input(HumanMessage(text, id="h-fork"), 99), at, context=context, durability="sync"
    )


def test_a_history_with_a_message_without_an_id_is_not_kept():
    loaded = sqlite_delta.Loaded()
    where = ("t", "", ("messages",))
    with_ids = {"messages": {"writes": [("task", "messages", [HumanMessage("hi", id="h1")])]}}
    without = {"messages": {"writes": [("task", "messages", [HumanMessage("hi")])]}}
    loaded.keep(where, "c1", with_ids)
    loaded.keep(where, "c2", without)
    kept = loaded.get(where, "c1")
    assert (
        plain(kept) == plain(with_ids)
        and kept["messages"]["writes"][0][2] is not (with_ids["messages"]["writes"][0][2])
    )
    assert loaded.get(where, "c2") is None


def checkpoint_rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = 't'"
        ).fetchall()


def rewrite_checkpoint(db: Path, checkpoint_id: str, typed: tuple[str, bytes]) -> None:
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = 't' "
            "AND checkpoint_ns = '' AND checkpoint_id = ?",
            (*typed, checkpoint_id),
        )


def test_a_changed_snapshot_is_decoded_and_checked_again(tmp_path: Path):
    db = tmp_path / "agent.sqlite"
    run_turns(db, "t", [f"what is {n} plus {n}" for n in range(27)])
    with open_checkpointer(db) as saver:
        head = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        loaded = saver.get_delta_channel_history(config=head, channels=CHANNELS)
        assert "seed" in loaded["messages"]  # kept: the next read would not decode it
        rewritten = 0
        for checkpoint_id, type_tag, blob in checkpoint_rows(db):
            checkpoint = saver.serde.loads_typed((type_tag, blob))
            snapshot = checkpoint["channel_values"].get("messages")
            if isinstance(snapshot, _DeltaSnapshot):
                checkpoint["channel_values"]["messages"] = _DeltaSnapshot([*snapshot.value, "hi"])
                rewrite_checkpoint(db, checkpoint_id, saver.serde.dumps_typed(checkpoint))
                rewritten += 1
        assert rewritten == 1
        with pytest.raises(UnreadableCheckpointError, match="stored messages holds a str"):
            saver.get_delta_channel_history(config=head, channels=CHANNELS)


def test_a_changed_write_is_decoded_and_checked_again(tmp_path: Path):
    db = tmp_path / "agent.sqlite"
    run_turns(db, "t", ["what is 1 plus 1", "what is 2 plus 2"])
    with open_checkpointer(db) as saver:
        head = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        saver.get_delta_channel_history(config=head, channels=CHANNELS)
        with sqlite3.connect(db) as connection:
            key = connection.execute(
                "SELECT checkpoint_id, task_id, idx FROM writes WHERE thread_id = 't' AND "
                "channel = 'messages' ORDER BY checkpoint_id DESC LIMIT 1"
            ).fetchone()
            connection.execute(
                "UPDATE writes SET type = ?, value = ? WHERE thread_id = 't' AND "
                "checkpoint_id = ? AND task_id = ? AND idx = ?",
                (*saver.serde.dumps_typed(["hi"]), *key),
            )
        with pytest.raises(UnreadableCheckpointError, match="a write to messages holds a str"):
            saver.get_delta_channel_history(config=head, channels=CHANNELS)


class CountingSerde:
    def __init__(self, value: object) -> None:
        self.value, self.calls = value, 0

    def loads_typed(self, data: tuple[str, bytes]) -> object:
        self.calls += 1
        return self.value


def test_a_write_holding_a_message_without_an_id_is_decoded_every_time():
    """`add_messages` gives such a message an id in place: kept, the next load would see it."""
    with_ids = CountingSerde([HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")])
    without = CountingSerde([HumanMessage("hi")])
    for serde, blob in ((with_ids, b"with ids"), (without, b"one without")):
        reader = sqlite_delta.WriteValues(serde, ("t", ""))
        first, again = (reader.loads_typed(("msgpack", blob)) for _ in range(2))
        assert first == again and first is not again
    assert (with_ids.calls, without.calls) == (1, 2)


def test_decoded_values_are_bounded_by_entries_and_bytes():
    cache = Decoded(entries=3, max_bytes=100)
    for key in "abcd":
        cache.keep(key, key.upper(), 10)
    assert cache.get("a") == (False, None) and cache.get("d") == (True, "D")  # least recent went
    cache.keep("big", "B", 11)  # over a tenth of the bytes: never kept
    assert cache.get("big") == (False, None)
    for key in "efghij":
        cache.keep(key, key, 10)
    cache.keep("k", "k", 10)
    assert len(cache) == 3
    small = Decoded(entries=100, max_bytes=100)
    for n in range(12):
        small.keep(n, n, 10)
    assert len(small) == 10 and small.get(1) == (False, None) and small.get(11) == (True, 11)


def test_a_groups_entries_are_dropped_together_but_the_named_ones_and_other_groups():
    cache = Decoded(entries=4, max_bytes=1000)
    for key, group in (("a", "t1"), ("b", "t1"), ("c", "t1"), ("x", "t2")):
        cache.keep(key, key, 10, group)
    cache.drop_group("t1", but={"c"})
    assert [cache.get(key)[0] for key in "abcx"] == [False, False, True, True]
    for key in "defg":  # the bound drops "c" and "x": their groups forget them
        cache.keep(key, key, 10, "t3")
    cache.drop_group("t1")
    cache.drop_group("t2")
    assert len(cache) == 4 and cache._bytes == 40 and set(cache._groups) == {"t3"}


def test_a_message_stored_in_several_blobs_is_one_object_while_it_lives():
    """Every snapshot stores the whole conversation again, and each message also has its write:
    decoded apart, a long thread's caches held ~27 copies of each message."""
    from app.db.base import checkpoint_serializer

    serde = checkpoint_serializer()
    message = AIMessage("42", id="a-shared")
    first, second = ([HumanMessage("q", id=f"h-{n}"), message] for n in range(2))
    blobs = [serde.dumps_typed(_DeltaSnapshot(value)) for value in (first, second)]
    snapshots = [serde.loads_typed(blob).value for blob in blobs]
    write = serde.loads_typed(serde.dumps_typed(message))
    assert snapshots[0][1] is snapshots[1][1] is write
    assert snapshots[0][0] is not snapshots[1][0] and plain_ids(snapshots) == [
        ["h-0", "a-shared"],
        ["h-1", "a-shared"],
    ]


def test_a_message_without_an_id_is_never_shared():
    """`add_messages` sets a missing id in place: two loads must not share that object."""
    from app.db.base import checkpoint_serializer

    serde = checkpoint_serializer()
    blob = serde.dumps_typed(HumanMessage("no id"))
    first, again = serde.loads_typed(blob), serde.loads_typed(blob)
    assert first == again and first is not again


def plain_ids(snapshots: list[list]) -> list[list[str]]:
    return [[m.id for m in snapshot] for snapshot in snapshots]


def test_the_write_cache_is_bounded_by_what_its_messages_hold_not_their_stored_bytes(monkeypatch):
    """A compressed message write is ~50 bytes and ~1.3 KB decoded: 4,096 of them, bounded by
    their stored size, held ~12 MB (serve's rise over 2,000 runs on 200 threads)."""
    from app.db.base import checkpoint_serializer
    from app.db.decoded import MESSAGE_BYTES

    bound = sqlite_delta.WRITES.max_bytes
    monkeypatch.setattr(sqlite_delta, "WRITES", Decoded(entries=4096, max_bytes=bound))
    serde = checkpoint_serializer()
    reader = sqlite_delta.WriteValues(serde, ("t", ""))
    for n in range(4096):
        reader.loads_typed(serde.dumps_typed([HumanMessage(f"q{n}", id=f"h-{n}")]))
    assert 0 < len(sqlite_delta.WRITES) * MESSAGE_BYTES <= bound < 4096 * MESSAGE_BYTES


def bytes_reachable(root: object, limit: int = 200_000) -> list[int]:
    """The sizes of the bytes objects `root` holds (through anything but classes and modules)."""
    import gc
    import types

    seen, sizes, todo = {id(root)}, [], [root]
    while todo and len(seen) < limit:
        for item in gc.get_referents(todo.pop()):
            if id(item) in seen or isinstance(item, type | types.ModuleType):
                continue
            seen.add(id(item))
            if isinstance(item, bytes):
                sizes.append(len(item))
            todo.append(item)
    return sizes


def test_the_decoded_snapshots_and_messages_do_not_keep_their_stored_bytes():
    """A snapshot's bytes are the whole conversation (~450 KB at 2,000 messages): kept as the
    key of its decoded value, a cached snapshot held its conversation twice."""
    from app.db import strict
    from app.db.base import checkpoint_serializer

    serde = checkpoint_serializer()
    conversation = [HumanMessage(f"question {n} " * 20, id=f"kept-{n}") for n in range(50)]
    loaded = serde.loads_typed(serde.dumps_typed(_DeltaSnapshot(conversation))).value
    assert [m.id for m in loaded] == [m.id for m in conversation]
    assert max(bytes_reachable(strict.SNAPSHOTS) + bytes_reachable(strict.MESSAGES)) <= 16


def fresh_thread_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHECKPOINTS", "WRITES"):
        monkeypatch.setattr(sqlite_delta, name, Decoded(entries=4096, max_bytes=64 << 20))
    monkeypatch.setattr(sqlite_delta, "SNAPSHOT_CHECKPOINTS", Decoded(entries=8, max_bytes=1 << 30))
    monkeypatch.setattr(sqlite_delta, "NEWEST_SEEDS", sqlite_delta.OrderedDict())


def test_a_threads_cached_writes_from_before_its_newest_snapshot_go_and_time_travel_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """No walk from a later head reads what came before the snapshot it stops at: in serve, a
    long thread's ~1,700 writes from before its last compaction sat in the caches."""
    fresh_thread_caches(monkeypatch)
    db = tmp_path / "agent.sqlite"
    run_turns(db, "t", [f"what is {n} plus {n}" for n in range(60)])  # past a second snapshot
    with open_checkpointer(db) as saver:
        configs = checkpoint_configs(saver)
        head = plain(saver.get_delta_channel_history(config=configs[0], channels=CHANNELS))
        since_snapshot = len(head["messages"]["writes"])
        assert len(sqlite_delta.WRITES) == since_snapshot < 100  # 60 turns wrote ~220
        assert len(sqlite_delta.SNAPSHOT_CHECKPOINTS) == 1
        assert len(sqlite_delta.CHECKPOINTS) < len(configs) // 2
        oldest = configs[-10]  # before the first snapshot
        expected = SqliteSaver.get_delta_channel_history(saver, config=oldest, channels=CHANNELS)
        assert plain(saver.get_delta_channel_history(config=oldest, channels=CHANNELS)) == plain(
            expected
        )
        assert len(sqlite_delta.WRITES) > since_snapshot  # the head's stay, the old ones join
