"""LangGraph's own RemoteGraph (langgraph.pregel.remote), unchanged, against a real `serve`: as a
client of a thread, and as a node of a local graph (two turns without a duplicated human message,
and Waypoint's approval interrupt answered through it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command, interrupt

from tests.server_process import running_server
from tests.test_langgraph_api import with_notes


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("remote")
    workspace = with_notes(tmp / "workspace")
    args = ("--db", str(tmp / "agent.sqlite"), "--workspace", str(workspace))
    with running_server(tmp, *args) as base:
        yield base, workspace


def thread_config() -> RunnableConfig:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def test_remote_graph_as_a_client_of_a_thread(served: tuple[str, Path]):
    base, workspace = served
    (workspace / "notes.txt").write_text("old")
    remote = RemoteGraph("waypoint", url=base)
    config = thread_config()
    assert {"agent", "tools"} <= set(remote.get_graph().nodes)

    done = remote.invoke(user("what is 6 times 7"), config)
    assert done["messages"][-1]["content"] == "6 * 7 = 42"
    modes = {
        part.event
        for part in remote.stream(
            user("what is 2 plus 2"), config, stream_mode=["values", "updates"]
        )
    }
    assert modes == {"values", "updates"}
    state = remote.get_state(config)
    assert state.values["turn"] == 2 and state.next == ()
    assert len(list(remote.get_state_history(config))) > 2

    paused = remote.invoke(user("write 'hi' to notes.txt"), config)
    [pending] = paused["__interrupt__"]
    [call] = pending["value"]["calls"]
    answered = remote.invoke(Command(resume={call["id"]: {"action": "approve"}}), config)
    assert answered["status"] == "answered"
    assert (workspace / "notes.txt").read_text() == "hi"


def test_remote_graph_as_a_node_keeps_one_copy_of_each_human_message(served: tuple[str, Path]):
    base, _ = served
    builder = StateGraph(MessagesState)
    builder.add_node("waypoint", RemoteGraph("waypoint", url=base))
    builder.add_edge(START, "waypoint")
    local = builder.compile(checkpointer=InMemorySaver())
    config = thread_config()

    local.invoke(user("what is 6 times 7"), config)
    second = local.invoke(user("what is 2 plus 2"), config)
    humans = [m.content for m in second["messages"] if m.type == "human"]
    assert humans == ["what is 6 times 7", "what is 2 plus 2"]
    assert second["messages"][-1].content == "2 + 2 = 4"


def test_an_approval_is_answered_through_a_remote_graph_node(served: tuple[str, Path]):
    base, workspace = served
    (workspace / "notes.txt").write_text("old")
    remote = RemoteGraph("waypoint", url=base)

    def ask_waypoint(state: MessagesState, config: RunnableConfig) -> dict:
        """Waypoint's pause becomes this graph's own interrupt; its answer resumes Waypoint."""
        thread_id = config["configurable"]["thread_id"]
        thread = remote.sync_client.threads.create(thread_id=thread_id, if_exists="do_nothing")
        pending = [i for found in thread["interrupts"].values() for i in found]
        if pending:
            decisions = interrupt(pending[0]["value"])
            done = remote.invoke(Command(resume=decisions), config)
        else:
            done = remote.invoke(state, config)
        return {"messages": done["messages"]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask_waypoint", ask_waypoint)
    builder.add_edge(START, "ask_waypoint")
    local = builder.compile(checkpointer=InMemorySaver())
    config = thread_config()

    local.invoke(user("what is 6 times 7"), config)
    local.invoke(user("write 'hi' to notes.txt"), config)
    [question] = local.get_state(config).interrupts
    [call] = question.value["calls"]
    assert call["name"] == "write_file"
    done = local.invoke(Command(resume={call["id"]: {"action": "approve"}}), config)
    assert (workspace / "notes.txt").read_text() == "hi"
    humans = [m.content for m in done["messages"] if m.type == "human"]
    assert humans == ["what is 6 times 7", "write 'hi' to notes.txt"]
