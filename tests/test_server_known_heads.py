"""A run starts from the head its thread's last run on this server left, without loading it again,
and loads it when anything else moved the head meanwhile (a state edit); its messages' JSON is
reused, so a run dumps only the messages new to it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.types import StateSnapshot

from app.server.standard import heads as heads_module
from app.server.standard.heads import KnownHeads
from app.server.standard.wire import MessageDumps
from app.service import head
from tests.app_client import app_client, wait


@pytest.fixture
def client() -> TestClient:
    return app_client()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads whose head a session loaded in full (from the stored checkpoints)."""
    loaded: list[str] = []
    load_state = head.load_state

    def counted(graph, thread_id):  # type: ignore[no-untyped-def]
        loaded.append(thread_id)
        return load_state(graph, thread_id)

    monkeypatch.setattr(head, "load_state", counted)
    return loaded


def test_a_run_starts_from_the_head_the_threads_last_run_here_left(
    client: TestClient, loads: list[str]
):
    wait(client, "t", "what is 2 plus 3")
    loads.clear()
    values = wait(client, "t", "what is 4 plus 5")
    assert loads == []
    assert values["turn"] == 2 and "9" in values["messages"][-1]["content"]


def test_a_head_moved_since_the_last_run_here_is_loaded_again(client: TestClient, loads: list[str]):
    wait(client, "e", "what is 2 plus 3")
    edit = {"values": {"turn": 10}, "as_node": "finalize"}
    assert client.post("/threads/e/state", json=edit).status_code == 200
    loads.clear()
    values = wait(client, "e", "what is 4 plus 5")
    assert loads == ["e"]
    assert values["turn"] == 11


def test_a_run_dumps_only_the_messages_new_to_it(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
):
    for n in range(9):
        wait(client, "j", f"what is {n} plus 1")
    dumped: list[str | None] = []
    model_dump = BaseMessage.model_dump

    def counted(message, **options):  # type: ignore[no-untyped-def]
        dumped.append(message.id)
        return model_dump(message, **options)

    monkeypatch.setattr(BaseMessage, "model_dump", counted)
    values = wait(client, "j", "what is 9 plus 1")
    # the run's 4 messages and the last run's 4 (read back as other objects), some of them more
    # than once (the input, the checkpoints), not the conversation's 36 others
    assert len(values["messages"]) == 40 and len(dumped) < 20
    assert values == client.get("/threads/j/state").json()["values"]


def test_a_deleted_threads_head_is_not_kept(client: TestClient):
    wait(client, "d", "what is 2 plus 3")
    heads = client.app.state.runs.heads
    assert heads.take("d", "react") is not None
    wait(client, "d", "what is 4 plus 5")
    assert client.delete("/threads/d").status_code == 204
    assert heads.take("d", "react") is None


def snapshot(name: str) -> StateSnapshot:
    config = {"configurable": {"checkpoint_id": name}}
    return StateSnapshot({}, (), config, None, None, None, (), ())


def test_the_least_recently_run_threads_head_goes_first():
    heads = KnownHeads(most=2)
    for thread in ("a", "b", "c"):
        heads.keep(thread, "react", snapshot(thread), MessageDumps())
    assert heads.take("a", "react") is None
    known = heads.take("c", "react")
    assert known is not None and known.head == snapshot("c") and len(heads) == 1


def test_only_the_newest_messages_json_is_kept_with_a_head(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(heads_module, "MAX_KEPT_DUMPS", 2)
    messages = [HumanMessage(f"message {n}", id=f"h{n}") for n in range(3)]
    dumps = MessageDumps()
    for message in messages:
        dumps.of(message)
    heads = KnownHeads()
    heads.keep(
        "t", "react", StateSnapshot({"messages": messages}, (), {}, None, None, None, (), ()), dumps
    )
    known = heads.take("t", "react")
    assert known is not None and len(known.dumps) == 2
    assert len(known.dumps.kept_for(messages[1:])) == 2  # the two newest
