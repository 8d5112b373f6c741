"""The HTTP API's contract, in process (FastAPI TestClient): the LangGraph Server API routes with
their 4xx messages, Waypoint's time-travel conveniences, auth. (The official SDKs against a real
server: tests/test_langgraph_api.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.server.api import create_app
from graphs.strategies import STRATEGIES
from tests.expected import assert_names_the_warmer_city
from tests.server_process import parse_sse
from tools.weather import forecast


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(load_settings()), base_url="http://localhost")


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def run(
    client: TestClient, thread: str, message: str, assistant: str = "waypoint", **extra: object
) -> list[tuple[str, dict]]:
    body = {
        "assistant_id": assistant,
        "input": user(message),
        "stream_mode": ["custom"],
        "final_event": True,
        **extra,
    }
    response = client.post(f"/threads/{thread}/runs/stream", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


def custom(events: list[tuple[str, dict]], kind: str | None = None) -> list[dict]:
    return [d for k, d in events if k == "custom" and kind in (None, d["type"])]


def flatten(segments: list[dict]) -> list[dict]:
    return [
        found
        for segment in segments
        for found in [segment, *(s for b in segment["branches"] for s in flatten(b))]
    ]


def test_health_page_and_openapi_list_every_route(client: TestClient):
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/ok").json() == {"ok": True}
    page = client.get("/")
    assert page.status_code == 200 and "<title>Waypoint</title>" in page.text
    assert client.get("/static/app.js").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/assistants/search",
        "/assistants/{assistant_id}/schemas",
        "/threads",
        "/threads/search",
        "/threads/{thread_id}",
        "/threads/{thread_id}/copy",
        "/threads/{thread_id}/state",
        "/threads/{thread_id}/history",
        "/threads/{thread_id}/runs/stream",
        "/threads/{thread_id}/runs/wait",
        "/threads/{thread_id}/runs/{run_id}/join",
        "/threads/{thread_id}/runs/{run_id}/cancel",
        "/store/items",
        "/threads/{thread_id}/timeline",
        "/threads/{thread_id}/rollback",
        "/threads/{thread_id}/fork",
        "/threads/{thread_id}/replay",
    } <= set(paths)
    assert set(paths["/threads/{thread_id}"]) == {"get", "patch", "delete"}
    stream = paths["/threads/{thread_id}/runs/stream"]["post"]
    assert {"200", "400", "401", "403", "404", "409", "413", "415", "422"} <= set(
        stream["responses"]
    )
    [thread_id] = [p for p in stream["parameters"] if p["name"] == "thread_id"]
    assert thread_id["schema"]["pattern"] == "^[A-Za-z0-9._-]{1,64}$"
    search = paths["/threads/search"]["post"]["responses"]
    assert "404" not in search and search["409"]["content"]["application/json"]


def test_threads_create_get_search_update_delete(client: TestClient):
    created = client.post("/threads", json={"thread_id": "t1", "metadata": {"owner": "ana"}})
    assert created.status_code == 200
    assert created.json() | {"created_at": "x", "updated_at": "x", "state_updated_at": "x"} == {
        "thread_id": "t1",
        "created_at": "x",
        "updated_at": "x",
        "state_updated_at": "x",
        "metadata": {"owner": "ana"},
        "status": "idle",
        "config": {},
        "values": None,
        "interrupts": {},
    }
    again = client.post("/threads", json={"thread_id": "t1"})
    assert again.status_code == 409 and again.json()["detail"] == "thread t1 already exists"
    kept = client.post("/threads", json={"thread_id": "t1", "if_exists": "do_nothing"})
    assert kept.status_code == 200 and kept.json()["metadata"] == {"owner": "ana"}
    made_up = client.post("/threads", json={}).json()["thread_id"]
    assert len(made_up) == 36  # a UUID, as LangGraph's server makes them
    found = client.post("/threads/search", json={"metadata": {"owner": "ana"}}).json()
    assert [t["thread_id"] for t in found] == ["t1"]
    assert len(client.post("/threads/search", json={"limit": 1}).json()) == 1

    patched = client.patch("/threads/t1", json={"metadata": {"team": "x"}})
    assert patched.json()["metadata"] == {"owner": "ana", "team": "x"}

    assert client.delete("/threads/t1").status_code == 204
    missing = client.get("/threads/t1")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "thread t1 does not exist; create it with POST /threads"
    assert client.delete("/threads/t1").status_code == 404


def test_bad_input_gets_a_4xx_with_a_message(client: TestClient):
    bad_path = client.get("/threads/" + "x" * 65)
    assert bad_path.status_code == 400 and "invalid thread id" in bad_path.json()["detail"]
    bad_id = client.post("/threads", json={"thread_id": "a b"})
    assert bad_id.status_code == 400 and "invalid thread id 'a b'" in bad_id.json()["detail"]
    assert client.post("/threads/search", json={"limit": 0}).status_code == 422

    body = {"assistant_id": "waypoint", "input": user("hi")}
    unknown = client.post("/threads/nope/runs/stream", json=body)
    assert unknown.status_code == 404 and '"if_not_exists": "create"' in unknown.json()["detail"]
    client.post("/threads", json={"thread_id": "e"})
    empty = client.post("/threads/e/runs/stream", json=body | {"input": user("  ")})
    assert empty.status_code == 400
    assert empty.json() == {
        "detail": "the message is empty; type something, or /exit to leave",
        "error": "bad_request",
    }
    not_user = {"messages": [{"role": "assistant", "content": "hi"}]}
    assert client.post("/threads/e/runs/stream", json=body | {"input": not_user}).status_code == 400
    mode = client.post("/threads/e/runs/stream", json=body | {"stream_mode": ["sideways"]})
    assert mode.status_code == 422 and "stream mode 'sideways' is not supported" in mode.text
    context = client.post("/threads/e/runs/stream", json=body | {"context": {"max_trials": 99}})
    assert context.status_code == 400 and "context: max_trials" in context.json()["detail"]
    auto = client.post("/threads/e/runs/stream", json=body | {"context": {"approval": "auto"}})
    assert auto.status_code == 403 and "--approve auto" in auto.json()["detail"]
    nobody = client.post("/threads/e/runs/stream", json=body | {"assistant_id": "nobody"})
    assert nobody.status_code == 404 and "waypoint-plan" in nobody.json()["detail"]


@pytest.mark.dated
def test_a_run_streams_waypoints_events_in_the_custom_mode(client: TestClient):
    events = run(
        client, "w", "weather in Paris and London, which is warmer?", if_not_exists="create"
    )
    assert events[0][0] == "metadata" and set(events[0][1]) == {"run_id", "attempt"}
    kinds = [d["type"] for d in custom(events)]
    calls = [d["id"] for d in custom(events, "tool_call")]
    results = [d["id"] for d in custom(events, "tool_result")]
    assert len(calls) == 3 and results == calls
    [final] = custom(events, "final")
    assert kinds[-1] == "final" and final["status"] == "answered"
    assert_names_the_warmer_city(
        final["answer"], forecast("Paris"), forecast("London"), chinese=False
    )


def test_the_standard_modes_carry_values_updates_and_message_chunks(client: TestClient):
    client.post("/threads", json={"thread_id": "lg"})
    body = {
        "assistant_id": "waypoint",
        "input": user("what is 6 times 7"),
        "stream_mode": ["values", "updates", "messages-tuple"],
    }
    events = parse_sse(client.post("/threads/lg/runs/stream", json=body).text)
    assert {k for k, _ in events} == {"metadata", "values", "updates", "messages"}
    assert events[-1][0] == "values"
    assert events[-1][1]["messages"][-1]["content"] == "6 * 7 = 42"
    nodes = [node for k, d in events if k == "updates" for node in d]
    assert nodes == ["agent", "tools", "agent"]
    chunks = [d[0] for k, d in events if k == "messages" and d[0]["type"] == "AIMessageChunk"]
    assert "".join(c["content"] for c in chunks) == "6 * 7 = 42"
    assert all(d[1]["langgraph_node"] for k, d in events if k == "messages")

    thread = client.get("/threads/lg").json()
    assert thread["status"] == "idle"
    assert [m["type"] for m in thread["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    state = client.get("/threads/lg/state").json()
    assert state["values"]["turn"] == 1 and state["next"] == []
    at = client.get(f"/threads/lg/state/{state['parent_checkpoint']['checkpoint_id']}").json()
    assert at["next"] == ["agent"]


def test_wait_history_update_state_and_copy(client: TestClient):
    client.post("/threads", json={"thread_id": "h"})
    body = {"assistant_id": "waypoint", "input": user("what is 6 times 7")}
    first = client.post("/threads/h/runs/wait", json=body).json()
    assert first["messages"][-1]["content"] == "6 * 7 = 42"
    second = client.post("/threads/h/runs/wait", json=body | {"input": user("what is 2 plus 3")})
    assert second.json()["turn"] == 2

    history = client.post("/threads/h/history", json={"limit": 100}).json()
    assert history[0]["values"]["turn"] == 2 and history[0]["next"] == []
    end_of_first = next(h for h in history if h["values"]["turn"] == 1 and not h["next"])
    older = client.get(f"/threads/h/history?limit=2&before={history[0]['checkpoint_id']}").json()
    assert [h["checkpoint_id"] for h in older] == [h["checkpoint_id"] for h in history[1:3]]

    written = client.post(
        "/threads/h/state",
        json={"values": {}, "as_node": "finalize", "checkpoint_id": end_of_first["checkpoint_id"]},
    )
    assert written.status_code == 200
    head = client.get("/threads/h/state").json()
    assert head["checkpoint_id"] == written.json()["checkpoint"]["checkpoint_id"]
    assert head["values"]["turn"] == 1
    branched = client.post("/threads/h/runs/wait", json=body | {"input": user("what is 9 minus 1")})
    asked = [m["content"] for m in branched.json()["messages"] if m["type"] == "human"]
    assert asked == ["what is 6 times 7", "what is 9 minus 1"]

    copy = client.post("/threads/h/copy").json()
    assert copy["values"] == client.get("/threads/h").json()["values"]
    copied = client.post(f"/threads/{copy['thread_id']}/history", json={"limit": 1000}).json()
    assert len(copied) == len(client.post("/threads/h/history", json={"limit": 1000}).json())

    bad = client.post("/threads/h/state", json={"values": {"turn": 1}, "as_node": "nowhere"})
    assert bad.status_code == 400 and "the state update was refused" in bad.json()["detail"]


def test_an_approval_interrupts_the_run_and_a_command_resumes_it(
    client: TestClient, isolated: Path
):
    notes = isolated / "workspace" / "notes.txt"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("old")
    client.post("/threads", json={"thread_id": "a"})
    body = {"assistant_id": "waypoint", "input": user("write 'hi' to notes.txt")}
    paused = client.post("/threads/a/runs/wait", json=body)
    assert paused.status_code == 200 and notes.read_text() == "old"
    thread = client.get("/threads/a").json()
    assert thread["status"] == "interrupted"
    [[pending]] = thread["interrupts"].values()
    [question] = pending["value"]["calls"]
    assert question["name"] == "write_file" and "overwrite" in question["reason"]

    resume = {
        "assistant_id": "waypoint",
        "command": {"resume": {question["id"]: {"action": "approve"}}},
    }
    done = client.post("/threads/a/runs/wait", json=resume).json()
    assert notes.read_text() == "hi" and done["status"] == "answered"
    assert client.get("/threads/a").json()["status"] == "idle"
    again = client.post("/threads/a/runs/wait", json=resume)
    assert again.json()["__error__"]["message"].startswith("thread a is not waiting for an answer")


def test_background_runs_join_get_list(client: TestClient):
    client.post("/threads", json={"thread_id": "b"})
    body = {"assistant_id": "waypoint", "input": user("what is 3 times 3")}
    run_info = client.post("/threads/b/runs", json=body).json()
    joined = client.get(f"/threads/b/runs/{run_info['run_id']}/join").json()
    assert joined["messages"][-1]["content"] == "3 * 3 = 9"
    got = client.get(f"/threads/b/runs/{run_info['run_id']}").json()
    assert got["status"] == "success" and got["thread_id"] == "b"
    assert [r["run_id"] for r in client.get("/threads/b/runs").json()] == [run_info["run_id"]]
    replayed = parse_sse(client.get(f"/threads/b/runs/{run_info['run_id']}/stream").text)
    assert replayed[0][0] == "metadata" and replayed[-1][0] == "values"
    assert client.get("/threads/b/runs/nope").status_code == 404


def test_the_store_keeps_items_and_waypoint_memories_stay_searchable(client: TestClient):
    put = client.put("/store/items", json={"namespace": ["a", "b"], "key": "k", "value": {"x": 1}})
    assert put.status_code == 204
    item = client.get("/store/items", params={"namespace": "a.b", "key": "k"}).json()
    assert item["value"] == {"x": 1} and item["namespace"] == ["a", "b"]
    found = client.post("/store/items/search", json={"namespace_prefix": ["a"]}).json()
    assert [i["key"] for i in found["items"]] == ["k"]
    assert (
        client.request(
            "DELETE", "/store/items", json={"namespace": ["a", "b"], "key": "k"}
        ).status_code
        == 204
    )
    gone = client.get("/store/items", params={"namespace": "a.b", "key": "k"})
    assert gone.status_code == 200 and gone.json() is None  # as LangGraph's server answers

    memory = {
        "namespace": ["memories", "waypoint-tester"],
        "key": "colour",
        "value": {"text": "my favourite colour is green"},
    }
    assert client.put("/store/items", json=memory).status_code == 204
    run(client, "m", "what is my favourite colour?", if_not_exists="create")
    assert (
        "green"
        in custom(run(client, "m", "do you remember my favourite colour?"), "final")[0]["answer"]
    )
    no_text = memory | {"value": {"colour": "green"}}
    assert client.put("/store/items", json=no_text).status_code == 400


def test_timeline_rollback_and_fork(client: TestClient):
    run(client, "h", "what is 6 times 7", if_not_exists="create")
    run(client, "h", "what is 2 plus 3")
    history = client.get("/threads/h/timeline").json()
    assert [t["turn"] for t in history["turns"]] == [2, 1]
    assert [s["turn"] for s in history["tree"]] == [1, 2] and history["tree"][1]["head"]
    turn_one_end = history["turns"][1]["checkpoint_id"]

    rolled = client.post("/threads/h/rollback", json={"turns": 1})
    assert rolled.status_code == 200
    result = rolled.json()
    assert result["target"]["checkpoint_id"] == turn_one_end
    assert result["undone_turns"] == [{"turn": 2, "preview": "what is 2 plus 3"}]
    after = client.get("/threads/h/timeline").json()
    assert after["head"] == result["head"] != history["head"]
    assert [t["turn"] for t in after["turns"]] == [1]
    head_segment = after["tree"][-1]
    assert head_segment["head"] and head_segment["note"] == "rollback"
    branch = after["tree"][0]["branches"][0]
    assert [s["turn"] for s in branch] == [1, 2] and not branch[-1]["on_branch"]
    assert client.get("/threads/h").json()["values"]["messages"][-1]["content"] == "6 * 7 = 42"

    too_far = client.post("/threads/h/rollback", json={"turns": 3})
    assert (
        too_far.status_code == 400 and "no earlier turn to go back to" in too_far.json()["detail"]
    )
    unknown = client.post("/threads/h/rollback", json={"checkpoint_id": "ffffffffffff"})
    assert unknown.status_code == 404 and "history --thread h --all" in unknown.json()["detail"]
    neither = client.post("/threads/h/rollback", json={})
    assert neither.status_code == 422 and '"turns" or "checkpoint_id"' in neither.json()["detail"]

    forked = client.post("/threads/h/fork", json={"to": "h2", "checkpoint_id": turn_one_end[-12:]})
    assert forked.status_code == 201
    assert forked.json()["forked_from"] == {"thread_id": "h", "checkpoint_id": turn_one_end}
    copied = client.get("/threads/h2").json()["values"]["messages"]
    assert copied == client.get("/threads/h").json()["values"]["messages"]
    assert client.post("/threads/h/fork", json={"to": "h2"}).status_code == 409
    assert client.post("/threads/nope/fork", json={"to": "h3"}).status_code == 404


def test_replay_reruns_a_turn_and_needs_confirm_for_side_effects(
    client: TestClient, isolated: Path
):
    run(client, "r", 'write "hello" to notes.txt', if_not_exists="create")
    checkpoints = client.get("/threads/r/timeline").json()["checkpoints"]
    after_input = next(c for c in checkpoints if c["turn"] == 1 and c["node"] == "input")
    before_tools = next(c for c in checkpoints if c["node"] == "agent")

    refused = client.post(
        "/threads/r/replay", json={"checkpoint_id": before_tools["checkpoint_id"]}
    )
    assert refused.status_code == 400 and '"confirm": true' in refused.json()["detail"]

    events = parse_sse(
        client.post("/threads/r/replay", json={"checkpoint_id": after_input["checkpoint_id"]}).text
    )
    notices = [d["text"] for d in custom(events, "notice")]
    assert 'write_file not re-run: send "confirm": true to allow it' in notices

    assert not (isolated / "workspace" / "notes.txt").exists()  # restored to before the turn
    confirmed = client.post(
        "/threads/r/replay", json={"checkpoint_id": after_input["checkpoint_id"], "confirm": True}
    )
    assert custom(parse_sse(confirmed.text), "final")[0]["status"] == "answered"
    assert (isolated / "workspace" / "notes.txt").read_text() == "hello"
    tree = client.get("/threads/r/timeline").json()["tree"]
    head = next(s for s in flatten(tree) if s["head"])
    assert head["note"] == "replay" and head["turn"] == 1
    assert [s["note"] for s in flatten(tree)].count("replay") == 2

    finished = client.get("/threads/r/state").json()["checkpoint_id"]
    nothing = client.post("/threads/r/replay", json={"checkpoint_id": finished})
    assert nothing.status_code == 400 and "nothing to re-run" in nothing.json()["detail"]


def test_bearer_token_guards_every_route_but_health_ok_and_the_page(isolated: Path):
    client = TestClient(
        create_app(load_settings(), api_token="s3cret"), base_url="http://localhost"
    )
    assert client.get("/health").json()["auth"] is True
    assert client.get("/ok").status_code == 200
    assert client.get("/").status_code == 200
    denied = client.post("/threads/search", json={})
    assert denied.status_code == 401 and "Bearer" in denied.json()["detail"]
    assert denied.headers["www-authenticate"] == "Bearer"
    wrong = {"Authorization": "Bearer wrong"}
    assert client.post("/threads/search", json={}, headers=wrong).status_code == 401
    body = {"assistant_id": "waypoint", "input": user("hi")}
    assert client.post("/threads/x/runs/stream", json=body).status_code == 401
    assert client.post("/assistants/search", json={}).status_code == 401
    right = {"Authorization": "Bearer s3cret"}
    assert client.post("/threads/search", json={}, headers=right).status_code == 200


def test_graph_route_has_the_mermaid_diagram(client: TestClient):
    graph = client.get("/graph").json()
    assert "agent -.-> tools;" in graph["mermaid"] and "retry --> agent;" in graph["mermaid"]
    assert {"source": "tools", "target": "agent", "conditional": True} in graph["edges"]


def test_assistants_are_the_strategies_with_langgraphs_ids(client: TestClient):
    found = client.post("/assistants/search", json={}).json()
    ids = {a["graph_id"]: a["assistant_id"] for a in found}
    assert ids["waypoint"] == "fa1f57a9-7612-5e7f-8c6b-4768848d3e9a"  # as langgraph dev's
    assert set(ids) == {strategy.graph_id for strategy in STRATEGIES.values()}
    schemas = client.get(f"/assistants/{ids['waypoint-plan']}/schemas").json()
    approval = schemas["context_schema"]["properties"]["approval"]
    assert approval["anyOf"][0]["enum"] == ["ask", "auto", "never"]  # or null: the server's
    assert "plan" in schemas["state_schema"]["properties"]
    graph = client.get("/assistants/waypoint/graph").json()
    assert {"source": "__start__", "target": "agent", "conditional": True} in graph["edges"]


def test_a_run_chooses_the_strategy_by_assistant_and_the_thread_keeps_it(client: TestClient):
    events = run(client, "st", "what is 6 times 7", "waypoint-plan", if_not_exists="create")
    assert custom(events, "plan") and custom(events, "final")[0]["status"] == "answered"
    assert client.get("/threads/st/state").json()["values"]["strategy"] == "plan"
    again = run(client, "st", "what is 1 plus 1", "waypoint-plan")
    assert custom(again, "plan")
