"""The conversation's approximate token count (graphs/shared/tokens.py) is langchain's own
`count_tokens_approximately`, with each message object counted once."""

from __future__ import annotations

import gc
import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from graphs.shared import tokens
from graphs.shared.tokens import message_tokens


def conversation() -> list:
    return [
        SystemMessage("summary of the older turns " * 7, name="conversation_summary"),
        HumanMessage("what is 17 times 23?", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "calculator", "args": {"expression": "17*23"}, "id": "c1"}],
        ),
        ToolMessage("391", tool_call_id="c1", name="calculator", id="t1"),
        AIMessage("17 × 23 = 391.", id="a2"),
        HumanMessage(
            [
                {"type": "text", "text": "and this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "other", "data": 1},
                "plain block",
            ],
            id="h2",
        ),
        AIMessage("x", id="a3"),  # 1 + 9 characters: a fraction rounded up per message
        {"role": "user", "content": "a dict message"},
        ("assistant", "a tuple message"),
    ]


def test_the_count_is_langchains_for_every_kind_of_message_and_prefix():
    messages = conversation()
    for end in range(len(messages) + 1):
        for _ in range(2):  # counted, then kept
            assert message_tokens(messages[:end]) == count_tokens_approximately(messages[:end])


def test_a_message_replaced_by_id_is_counted_by_its_own_content():
    first = [HumanMessage("short", id="m")]
    longer = [HumanMessage("a much longer message than before " * 5, id="m")]
    assert message_tokens(first) == count_tokens_approximately(first)
    assert message_tokens(longer) == count_tokens_approximately(longer) > message_tokens(first)


def test_counts_of_messages_gone_are_dropped_as_they_die(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tokens, "_counts", {})  # other tests' messages may still live (in caches)
    kept = [HumanMessage(f"kept {n}") for n in range(10)]
    message_tokens(kept)
    for n in range(500):
        message_tokens([HumanMessage(f"gone {n}")])
    gc.collect()
    assert sorted(tokens._counts) == sorted(id(m) for m in kept)  # none of the 500 gone
    assert message_tokens(kept) == count_tokens_approximately(kept)


def test_a_count_dropped_in_another_thread_leaves_the_new_messages_counts():
    messages = [HumanMessage(f"message {n}") for n in range(200)]
    message_tokens(messages)
    dropping = threading.Thread(target=messages.clear)  # the callbacks run in that thread
    dropping.start()
    fresh = [HumanMessage(f"fresh {n}") for n in range(200)]
    assert message_tokens(fresh) == count_tokens_approximately(fresh)
    dropping.join()
    gc.collect()
    assert all(tokens._counts[id(m)][0]() is m for m in fresh)
