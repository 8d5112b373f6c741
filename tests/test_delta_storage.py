"""Messages live on a DeltaChannel: storage grows linearly, and history and rollback still work."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langchain_core.messages import HumanMessage

from app.config import load_settings
from app.models.offline import OfflineChatModel
from app.store import open_checkpointer
from graphs.react.graph import build_graph
from graphs.state import AgentContext, turn_input
from tools import default_tools


def run_turns(db: Path, thread: str, texts: list[str]) -> None:
    settings = load_settings(db=db)
    context = AgentContext(model=OfflineChatModel(), tools=default_tools(settings.workspace))
    with open_checkpointer(db) as saver:
        graph = build_graph(saver)
        for text in texts:
            config = {"configurable": {"thread_id": thread}}
            turn = graph.get_state(config).values.get("turn", 0) + 1
            graph.invoke(
                turn_input(HumanMessage(text, id=f"h-{thread}-{turn}"), turn),
                {**config, "metadata": {"turn": turn}},
                context=context,
                durability="sync",
            )


def checkpoint_bytes_of_turn(db: Path, thread: str, turn: int) -> int:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT SUM(LENGTH(checkpoint)) FROM checkpoints WHERE thread_id = ? AND "
            "json_extract(CAST(metadata AS TEXT), '$.turn') = ?",
            (thread, turn),
        ).fetchone()[0]


def test_checkpoint_blobs_do_not_grow_with_the_conversation(db_path: Path):
    long_message = "remember that " + "the quick brown fox " * 200
    run_turns(db_path, "long", [long_message] * 40)
    first, last = (
        checkpoint_bytes_of_turn(db_path, "long", 2),
        checkpoint_bytes_of_turn(db_path, "long", 39),
    )
    # With the default channel every checkpoint re-stores all messages (~160 KB by turn 39).
    assert last < first * 1.5, (first, last)


def test_history_and_rollback_rebuild_messages_from_deltas(db_path: Path):
    run_turns(db_path, "tt", ["what is 1 plus 1", "what is 2 plus 2", "what is 3 plus 3"])
    settings = load_settings(db=db_path)
    with open_checkpointer(db_path) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": "tt"}}
        snapshots = list(graph.get_state_history(config))
        end_of_turn_1 = next(s for s in snapshots if s.metadata.get("turn") == 1 and not s.next)
        assert [m.content for m in end_of_turn_1.values["messages"]][-1] == "1 + 1 = 2"

        graph.update_state(end_of_turn_1.config, None, as_node="__copy__")
        assert len(graph.get_state(config).values["messages"]) == len(
            end_of_turn_1.values["messages"]
        )
        context = AgentContext(model=OfflineChatModel(), tools=default_tools(settings.workspace))
        graph.invoke(
            turn_input(HumanMessage("what is 5 plus 5", id="h-after"), 2),
            config,
            context=context,
            durability="sync",
        )
        contents = [m.content for m in graph.get_state(config).values["messages"]]
    humans = contents[0::4]
    assert humans == ["what is 1 plus 1", "what is 5 plus 5"]
    assert contents[-1] == "5 + 5 = 10"
    # the rolled-back turns are still in history, on the old branch
    assert any(s.values["messages"][-1].content == "3 + 3 = 6" for s in snapshots)


def test_merge_messages_equals_the_fold_however_the_writes_are_batched():
    """DeltaChannel replays writes in batches of any size: the reducer must give the same list as
    applying `add_messages` one write at a time (appends, edits by id, removals, summaries)."""
    import functools
    import random

    from langchain_core.messages import AIMessage, RemoveMessage, SystemMessage
    from langgraph.graph import add_messages
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    from graphs.state import merge_messages

    rng = random.Random(7)
    for _ in range(150):
        batches, live = [], []
        for step in range(rng.randint(1, 40)):
            roll = rng.random()
            if roll < 0.6 or not live:
                batches.append([HumanMessage(f"h{step}", id=f"m{step}")])
                live.append(f"m{step}")
            elif roll < 0.75:
                batches.append([AIMessage(f"edit {step}", id=rng.choice(live))])
            elif roll < 0.85:
                gone = rng.choice(live)
                batches.append([RemoveMessage(id=gone)])
                live.remove(gone)
            else:
                keep = live[-2:]
                batches.append(
                    [
                        RemoveMessage(id=REMOVE_ALL_MESSAGES),
                        SystemMessage("summary", id=f"s{step}"),
                        *[HumanMessage("kept", id=k) for k in keep],
                    ]
                )
                live = [f"s{step}", *keep]
        expected = [(m.id, m.content) for m in functools.reduce(add_messages, batches, [])]
        for split in range(len(batches) + 1):
            merged = merge_messages(merge_messages([], batches[:split]), batches[split:])
            assert [(m.id, m.content) for m in merged] == expected


def test_a_stored_snapshot_is_decoded_once_and_every_load_gets_its_own_list(db_path: Path):
    """Every run of a turn loads the thread from its latest snapshot: the same bytes are decoded
    (and checked) once per process; a changed blob is other bytes, decoded afresh."""
    from app.db.strict import Snapshots

    decoded: list[bytes] = []
    snapshots = Snapshots(size=2)

    def decoder(payload: bytes):  # type: ignore[no-untyped-def]
        def decode() -> list:
            decoded.append(payload)
            return [HumanMessage("hi", id=payload.decode())]

        return decode

    first = snapshots.value(b"a", decoder(b"a"))
    again = snapshots.value(b"a", decoder(b"a"))
    assert first == again and first is not again and first[0] is again[0]
    assert decoded == [b"a"]
    snapshots.value(b"b", decoder(b"b"))
    snapshots.value(b"c", decoder(b"c"))  # the least recently used (a) goes
    snapshots.value(b"a", decoder(b"a"))
    assert decoded == [b"a", b"b", b"c", b"a"]

    # through the saver: a thread past its first snapshot reads back the same after a reload
    run_turns(db_path, "t", [f"what is {n} plus {n}" for n in range(27)])
    with open_checkpointer(db_path) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": "t"}}
        once, twice = (graph.get_state(config).values["messages"] for _ in range(2))
    assert [m.id for m in once] == [m.id for m in twice] and len(once) == 27 * 4
