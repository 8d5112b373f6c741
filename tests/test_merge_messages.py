"""The messages reducer (graphs/state.merge_messages) gives exactly `add_messages`'s result, step by
step as a thread's channel applies it, including on the fast paths: appending to a list it returned
(graphs/message_ids.py) and merging after a reset."""

from __future__ import annotations

import copy
import random

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.graph import add_messages
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from graphs.message_ids import MessageIds
from graphs.state import merge_messages


def shown(messages: list) -> list[tuple]:
    return [(type(m).__name__, m.id, m.content) for m in messages]


def random_batch(rng: random.Random, step: int, live: list[str]) -> list:
    roll = rng.random()
    if roll < 0.55 or not live:
        return [HumanMessage(f"h{step}", id=f"m{step}"), AIMessage(f"a{step}", id=f"a{step}")]
    if roll < 0.65:
        return [AIMessage(f"edit {step}", id=rng.choice(live))]  # replaced by id, in place
    if roll < 0.75:
        return [RemoveMessage(id=rng.choice(live))]
    if roll < 0.8:
        return [AIMessageChunk(f"chunk {step}", id=f"c{step}")]  # coerced to an AIMessage
    if roll < 0.85:
        return [
            HumanMessage(f"again {step}", id=live[-1]),
            HumanMessage(f"new {step}", id=f"n{step}"),
        ]
    if roll < 0.9:
        return [
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            SystemMessage("summary", id=f"s{step}"),
            *[HumanMessage("kept", id=k) for k in live[-2:]],
        ]
    return [SystemMessage(f"notice {step}", id=f"x{step}")]


@pytest.mark.parametrize("copies", [False, True], ids=["the channel's list", "a copy of it"])
def test_each_step_gives_add_messages_result(copies: bool):
    """A graph's channel merges each step's writes into the list the reducer returned before; a
    conditional edge reads a copy of the channel with the writes applied (LangGraph's local_read)."""
    rng = random.Random(11)
    for _ in range(60):
        current: list = []
        for step in range(rng.randint(1, 60)):
            batch = random_batch(rng, step, [m.id for m in current])
            before = shown(current)
            try:
                expected = shown(add_messages(current, batch))
            except ValueError:
                with pytest.raises(ValueError):
                    merge_messages(copy.copy(current) if copies else current, [batch])
                continue
            merged = merge_messages(copy.copy(current) if copies else current, [batch])
            assert shown(merged) == expected
            assert shown(current) == before and merged is not current
            current = merged


def test_appending_reuses_the_ids_of_a_list_it_returned():
    ids = MessageIds()
    first = ids.record([HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")])
    new = [HumanMessage("more", id="h2")]
    appended = ids.appended(first, new)
    assert appended == [*first, *new] and appended is not first
    assert ids.appended(list(first), new) == appended  # a copy is found too
    assert ids.appended(appended, [AIMessage("ok", id="a2")]) is not None  # and the longer list

    # None whenever add_messages would do more than append
    assert ids.appended(first, [AIMessage("edited", id="a1")]) is None  # an existing id
    assert ids.appended(first, [RemoveMessage(id="a1")]) is None
    assert ids.appended(first, [AIMessageChunk("part", id="c1")]) is None
    assert ids.appended(first, [HumanMessage("no id")]) is None
    assert ids.appended([HumanMessage("hi", id="h1"), AIMessage("other", id="a1")], new) is None
    assert ids.appended([], new) is None


def test_kept_lists_are_bounded():
    ids = MessageIds(size=3)
    lists = [ids.record([HumanMessage(str(n), id=str(n))]) for n in range(5)]
    new = [HumanMessage("new", id="new")]
    assert ids.appended(lists[0], new) is None and ids.appended(lists[1], new) is None
    assert ids.appended(lists[4], new) is not None
