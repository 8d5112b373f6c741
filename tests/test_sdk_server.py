"""What serve does for the LangGraph SDK calls that issue 28 adds, driven by the official Python SDK
against a real `python -m app serve` on 127.0.0.1: LangGraph's stream modes, breakpoints, commands,
rollback, stateless runs, a thread's stream, history pages, client message ids, settings in
config.configurable. Slow runs hold on the server's "slow step" tool (tests/server_process.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.server_process import Hold, running_server
from tests.test_langgraph_api import with_notes

ASK = {"approval": "ask"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, Path]]:
    """The server on a SQLite file or on a fresh PostgreSQL database."""
    tmp = tmp_path_factory.mktemp("sdk-serve")
    workspace = with_notes(tmp / "workspace")
    pg = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    database = pg.new_database() if pg else str(tmp / "agent.sqlite")
    with running_server(tmp, "--db", database, "--workspace", str(workspace)) as base:
        yield base, workspace, tmp
    if pg:
        pg.drop_database(database)


@pytest.fixture
def client(served: tuple[str, Path, Path]) -> SyncLangGraphClient:
    return get_sync_client(url=served[0], timeout=60)


@pytest.fixture
def hold(served: tuple[str, Path, Path]) -> Iterator[Hold]:
    with Hold(served[2]) as held:
        yield held


def user(text: str, **extra: Any) -> dict:
    return {"messages": [{"role": "user", "content": text, **extra}]}


def answer(values: dict) -> str:
    return values["messages"][-1]["content"]


def new_thread(client: SyncLangGraphClient) -> str:
    return client.threads.create()["thread_id"]


def slow_run(client: SyncLangGraphClient, tid: str) -> dict:
    """A background run that holds in its slow step (its custom events name the step)."""
    return client.runs.create(
        tid, "waypoint", input=user("do the slow step"), stream_mode=["values", "custom"]
    )


def started(client: SyncLangGraphClient, tid: str, run_id: str) -> None:
    """Until the run is inside its slow step (its tool_call seen on its stream)."""
    for part in client.runs.join_stream(tid, run_id, stream_mode="custom"):
        if part.event == "custom" and part.data.get("type") == "tool_call":
            return
    raise AssertionError("the run ended before its slow step")


def test_langgraphs_own_stream_modes_come_as_its_server_sends_them(client: SyncLangGraphClient):
    modes = ["messages", "messages-tuple", "events", "debug", "tasks", "checkpoints", "custom"]
    parts = list(
        client.runs.stream(
            new_thread(client), "waypoint", input=user("what is 6 times 7"), stream_mode=modes
        )
    )
    run_id = parts[0].data["run_id"]
    by_event: dict[str, list] = {}
    for part in parts:
        by_event.setdefault(part.event, []).append(part.data)

    # messages: each message's metadata once, then the message so far
    first_metadata = next(iter(by_event["messages/metadata"][0].values()))["metadata"]
    assert first_metadata["langgraph_node"] == "agent"
    assert "6 * 7 = 42" in [m[0]["content"] for m in by_event["messages/partial"]]
    assert [m[0]["content"] for m in by_event["messages/complete"]] == ["42"]  # the tool's
    # messages-tuple: LangGraph's metadata with the run's ids
    for _, metadata in by_event["messages"]:
        assert metadata["run_id"] == run_id
        assert metadata["graph_id"] == "waypoint" and metadata["assistant_id"]
    # debug, tasks and checkpoints: LangGraph's own items
    debug_kinds = [d["type"] for d in by_event["debug"]]
    assert {"checkpoint", "task", "task_result"} <= set(debug_kinds)
    checkpoint = next(d for d in by_event["debug"] if d["type"] == "checkpoint")["payload"]
    assert checkpoint["checkpoint"]["checkpoint_id"] and "values" in checkpoint
    assert "__waypoint_fence" not in str(by_event["debug"])
    started_tasks = [t["name"] for t in by_event["tasks"] if "input" in t]
    assert started_tasks[:3] == ["agent", "tools", "agent"]
    last = by_event["checkpoints"][-1]
    assert last["next"] == [] and answer(last["values"]) == "6 * 7 = 42"
    # events: the astream_events records of the tokens, the nodes and the run's end
    kinds = [e["event"] for e in by_event["events"]]
    assert kinds[0] == "on_chain_start" and kinds[-1] == "on_chain_end"
    assert "on_chat_model_stream" in kinds and "on_chain_stream" in kinds
    assert by_event["events"][0]["data"]["input"] == user("what is 6 times 7")
    assert answer(by_event["events"][-1]["data"]["output"]) == "6 * 7 = 42"
    # Waypoint's own custom events, without the `final` event LangGraph never sends
    assert "final" not in [c["type"] for c in by_event["custom"]]


def test_breakpoints_pause_the_run_and_no_input_goes_on(client: SyncLangGraphClient):
    tid = new_thread(client)
    client.runs.wait(tid, "waypoint", input=user("what is 6 times 7"), interrupt_before=["tools"])
    paused = client.threads.get_state(tid)
    assert paused["next"] == ["tools"] and paused["values"]["messages"][-1]["tool_calls"]
    client.runs.wait(tid, "waypoint", input=None, interrupt_after=["tools"])
    assert client.threads.get_state(tid)["next"] == ["agent"]
    done = client.runs.wait(tid, "waypoint", input=None)
    assert answer(done) == "6 * 7 = 42" and client.threads.get_state(tid)["next"] == []
    bad = client.http.client.post(
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": "waypoint", "interrupt_before": [1]},
    )
    assert bad.status_code == 422 and "node names" in bad.text


def test_a_resume_command_with_null_fields_answers_the_approval(
    client: SyncLangGraphClient, served: tuple[str, Path, Path]
):
    workspace = served[1]
    (workspace / "notes.txt").write_text("old")
    tid = new_thread(client)
    client.runs.wait(tid, "waypoint", input=user("write 'hi' to notes.txt"), context=ASK)
    [pending] = client.threads.get_state(tid)["interrupts"]
    [call] = pending["value"]["calls"]
    command: Any = {  # what LangGraph's RemoteGraph sends
        "graph": None,
        "update": None,
        "resume": {call["id"]: {"action": "approve"}},
        "goto": [],
    }
    done = client.runs.wait(tid, "waypoint", command=command, context=ASK)
    assert done["status"] == "answered" and (workspace / "notes.txt").read_text() == "hi"


def test_commands_go_to_a_node_and_update_the_state(client: SyncLangGraphClient):
    tid = new_thread(client)
    client.runs.wait(tid, "waypoint", input=user("what is 6 times 7"), interrupt_before=["tools"])
    # skip the tool call: go to finalize, which closes the turn
    client.runs.wait(tid, "waypoint", command={"goto": "finalize"})
    state = client.threads.get_state(tid)
    assert state["next"] == [] and state["values"]["turn"] == 1
    client.runs.wait(tid, "waypoint", command={"update": {"status": "failed"}})
    assert client.threads.get_state(tid)["values"]["status"] == "failed"
    bad = client.http.client.post(
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": "waypoint", "command": {"jump": "agent"}},
    )
    assert bad.status_code == 422 and "unknown command fields" in bad.text
    nowhere = client.http.client.post(
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": "waypoint", "command": {"goto": "nowhere"}},
    )
    assert nowhere.status_code == 400 and "waypoint has no node nowhere" in nowhere.text


def test_rollback_strategy_cancels_the_running_run_and_removes_what_it_wrote(
    client: SyncLangGraphClient, hold: Hold
):
    tid = new_thread(client)
    client.runs.wait(tid, "waypoint", input=user("what is 6 times 7"))
    before = client.threads.get_state(tid)["checkpoint"]
    slow = slow_run(client, tid)
    started(client, tid, slow["run_id"])
    second = client.runs.create(
        tid, "waypoint", input=user("what is 2 plus 2"), multitask_strategy="rollback"
    )
    hold.release()
    done = client.runs.join(tid, second["run_id"])
    asked = [m["content"] for m in done["messages"] if m["type"] == "human"]
    assert asked == ["what is 6 times 7", "what is 2 plus 2"]
    history = client.threads.get_history(tid, limit=100)
    assert before in [h["checkpoint"] for h in history]
    assert slow["run_id"] not in {h["metadata"].get("run_id") for h in history}
    with pytest.raises(httpx.HTTPStatusError) as gone:
        client.runs.get(tid, slow["run_id"])
    assert gone.value.response.status_code == 404


def test_cancel_with_rollback_leaves_the_thread_as_it_was(client: SyncLangGraphClient, hold: Hold):
    tid = new_thread(client)
    client.runs.wait(tid, "waypoint", input=user("what is 6 times 7"))
    before = client.threads.get_state(tid)
    slow = slow_run(client, tid)
    started(client, tid, slow["run_id"])
    client.runs.cancel(tid, slow["run_id"], action="rollback")
    hold.release()
    client.runs.join(tid, slow["run_id"])
    after = client.threads.get_state(tid)
    assert after["checkpoint"] == before["checkpoint"] and after["values"] == before["values"]
    assert client.threads.get(tid)["status"] == "idle"


def test_an_interrupted_run_is_closed_and_the_next_one_runs(
    client: SyncLangGraphClient, hold: Hold
):
    tid = new_thread(client)
    slow = slow_run(client, tid)
    started(client, tid, slow["run_id"])
    second = client.runs.create(
        tid, "waypoint", input=user("what is 2 plus 2"), multitask_strategy="interrupt"
    )
    hold.release()
    done = client.runs.join(tid, second["run_id"])
    assert answer(done) == "2 + 2 = 4"
    assert client.runs.get(tid, slow["run_id"])["status"] == "interrupted"


def test_stateless_runs_use_a_thread_of_their_own_and_delete_it(client: SyncLangGraphClient):
    before = client.threads.count()
    done = client.runs.wait(None, "waypoint", input=user("what is 2 plus 2"))
    assert answer(done) == "2 + 2 = 4"
    assert client.threads.count() == before
    parts = list(client.runs.stream(None, "waypoint", input=user("what is 3 times 3")))
    assert answer([p.data for p in parts if p.event == "values"][-1]) == "3 * 3 = 9"
    kept = client.runs.create(
        None, "waypoint", input=user("what is 2 plus 2"), on_completion="keep"
    )
    assert answer(client.runs.join(kept["thread_id"], kept["run_id"])) == "2 + 2 = 4"
    assert client.threads.get(kept["thread_id"])["metadata"] == {"stateless": True}


def test_a_threads_stream_follows_its_running_run(client: SyncLangGraphClient, hold: Hold):
    tid = new_thread(client)
    slow = slow_run(client, tid)
    started(client, tid, slow["run_id"])
    seen: list[str] = []
    joined = threading.Event()

    def follow() -> None:
        for part in client.threads.join_stream(tid):
            seen.append(part.event)
            joined.set()  # the run's events so far came first: the stream is following it

    reader = threading.Thread(target=follow)
    reader.start()
    assert joined.wait(timeout=30)
    hold.release()
    reader.join(timeout=60)
    assert not reader.is_alive() and seen[-1] == "values"
    assert list(client.threads.join_stream(tid)) == []  # nothing running: an empty stream


def test_history_pages_with_a_config_as_langgraph_names_it(client: SyncLangGraphClient):
    tid = new_thread(client)
    client.runs.wait(tid, "waypoint", input=user("what is 6 times 7"))
    first, second, third, *_ = client.threads.get_history(tid, limit=100)
    page = client.threads.get_history(tid, limit=2, before={"configurable": first["checkpoint"]})
    assert [h["checkpoint"] for h in page] == [second["checkpoint"], third["checkpoint"]]
    nameless = client.http.client.post(
        f"/threads/{tid}/history",
        json={"before": {"configurable": {}}},
    )
    assert nameless.status_code == 400 and "checkpoint_id" in nameless.text


def test_a_clients_message_id_is_kept(client: SyncLangGraphClient):
    tid = new_thread(client)
    client.runs.wait(tid, "waypoint", input=user("what is 6 times 7", id="client-id-1"))
    humans = [
        m for m in client.threads.get_state(tid)["values"]["messages"] if m["type"] == "human"
    ]
    assert [m["id"] for m in humans] == ["client-id-1"]


def test_run_settings_in_config_configurable_count_as_context(client: SyncLangGraphClient):
    tid = new_thread(client)
    client.runs.wait(
        tid,
        "waypoint",
        input=user("write 'hi' to notes.txt"),
        config={"configurable": {"approval": "never", "thread_id": tid}},
    )
    state = client.threads.get_state(tid)
    assert not state["interrupts"]  # refused by the policy, not asked
    results = [m for m in state["values"]["messages"] if m["type"] == "tool"]
    assert results and results[-1]["status"] == "error"
    # the context's own setting wins over configurable's
    other = new_thread(client)
    client.runs.wait(
        other,
        "waypoint",
        input=user("write 'hi' to notes.txt"),
        config={"configurable": {"approval": "never"}},
        context=ASK,
    )
    assert client.threads.get_state(other)["interrupts"]


def test_cancel_many_and_batch(client: SyncLangGraphClient, hold: Hold):
    tid = new_thread(client)
    slow = slow_run(client, tid)
    started(client, tid, slow["run_id"])
    client.runs.cancel_many(thread_id=tid, run_ids=[slow["run_id"]])
    hold.release()
    client.runs.join(tid, slow["run_id"])
    assert client.runs.get(tid, slow["run_id"])["status"] == "interrupted"
    made = client.runs.create_batch(
        [
            {
                "assistant_id": "waypoint",
                "input": user(f"what is {n} plus 1"),
                "on_completion": "keep",
            }
            for n in (1, 2)
        ]
    )
    assert len({r["thread_id"] for r in made}) == 2
    outcomes = [client.runs.join(r["thread_id"], r["run_id"]) for r in made]
    assert [answer(o) for o in outcomes] == ["1 + 1 = 2", "2 + 1 = 3"]


def test_unknown_thread_in_cancel_many_is_a_404(client: SyncLangGraphClient):
    response = client.http.client.post(
        "/runs/cancel",
        json={"thread_id": str(uuid.uuid4()), "run_ids": [str(uuid.uuid4())]},
    )
    assert response.status_code == 404


def test_a_clients_own_assistant_runs_with_its_context_and_keeps_its_versions(
    client: SyncLangGraphClient,
):
    made = client.assistants.create(
        "waypoint", context={"approval": "never"}, name="careful", metadata={"team": "a"}
    )
    aid = made["assistant_id"]
    assert made["version"] == 1 and client.assistants.get(aid)["context"] == {"approval": "never"}
    tid = new_thread(client)
    client.runs.wait(tid, aid, input=user("write 'hi' to notes.txt"))
    assert not client.threads.get_state(tid)["interrupts"]  # its policy refused the write
    assert client.runs.list(tid)[0]["assistant_id"] == aid

    updated = client.assistants.update(aid, context={"approval": "ask"})
    assert updated["version"] == 2 and updated["name"] == "careful"
    assert [v["version"] for v in client.assistants.get_versions(aid)] == [2, 1]
    other = new_thread(client)
    client.runs.wait(other, aid, input=user("write 'hi' to notes.txt"))
    assert client.threads.get_state(other)["interrupts"]  # version 2 asks
    assert client.assistants.set_latest(aid, 1)["context"] == {"approval": "never"}
    assert [a["assistant_id"] for a in client.assistants.search(metadata={"team": "a"})] == [aid]

    def status(call: Any) -> int:
        with pytest.raises(httpx.HTTPStatusError) as failed:
            call()
        return failed.value.response.status_code

    assert status(lambda: client.assistants.create("waypoint", context={"max_trials": 99})) == 400
    assert status(lambda: client.assistants.create("nowhere")) == 404
    assert status(lambda: client.assistants.update("waypoint", name="mine")) == 409
    assert status(lambda: client.assistants.create("waypoint", assistant_id=aid)) == 409
    client.assistants.delete(aid)
    assert status(lambda: client.assistants.get(aid)) == 404
    # a record written through the store API is checked, not trusted
    client.store.put_item(["waypoint", "assistants"], "junk", {"graph_id": "nowhere"})
    assert status(lambda: client.assistants.get("junk")) == 404
    assert "junk" not in {a["assistant_id"] for a in client.assistants.search(limit=100)}
