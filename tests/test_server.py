"""The HTTP API's contract, in process (FastAPI TestClient): every route, its 4xx messages, auth."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.server.api import create_app
from tests.expected import assert_names_the_warmer_city
from tests.server_process import parse_sse
from tools.weather import forecast

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(load_settings()), base_url="http://localhost")


def run(client: TestClient, thread: str, message: str, **extra: object) -> list[tuple[str, dict]]:
    response = client.post(f"/threads/{thread}/runs/stream", json={"message": message, **extra})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


def flatten(segments: list[dict]) -> list[dict]:
    return [
        found
        for segment in segments
        for found in [segment, *(s for b in segment["branches"] for s in flatten(b))]
    ]


def test_health_page_and_openapi_list_every_route(client: TestClient):
    assert client.get("/health").json()["status"] == "ok"
    page = client.get("/")
    assert page.status_code == 200 and "<title>Waypoint</title>" in page.text
    assert client.get("/static/app.js").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths) == {
        "/health",
        "/graph",
        "/threads",
        "/threads/{thread_id}",
        "/threads/{thread_id}/runs/stream",
        "/threads/{thread_id}/runs/cancel",
        "/threads/{thread_id}/history",
        "/threads/{thread_id}/rollback",
        "/threads/{thread_id}/fork",
        "/threads/{thread_id}/replay",
    }
    assert set(paths["/threads/{thread_id}"]) == {"get", "delete"}


def test_threads_create_get_list_delete(client: TestClient):
    created = client.post("/threads", json={"thread_id": "t1"})
    assert created.status_code == 201
    assert created.json() | {"updated_at": "x", "head": "x"} == {
        "thread_id": "t1",
        "title": "",
        "turns": 0,
        "checkpoints": 1,
        "updated_at": "x",
        "size_bytes": 0,
        "interrupted": False,
        "head": "x",
        "next": [],
        "status": None,
        "messages": [],
    }
    again = client.post("/threads", json={"thread_id": "t1"})
    assert again.status_code == 409 and again.json()["detail"] == "thread t1 already exists"
    assert (
        client.post("/threads", json={"thread_id": "t1", "if_exists": "do_nothing"}).status_code
        == 200
    )
    made_up = client.post("/threads", json={}).json()["thread_id"]
    assert [t["thread_id"] for t in client.get("/threads").json()] == [made_up, "t1"]
    assert client.get("/threads?limit=1&offset=1").json()[0]["thread_id"] == "t1"

    deleted = client.delete("/threads/t1")
    assert deleted.status_code == 200 and deleted.json()["checkpoints"] == 1
    missing = client.get("/threads/t1")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "thread t1 does not exist; create it with POST /threads"
    assert client.delete("/threads/t1").status_code == 404


def test_bad_input_gets_a_4xx_with_a_message(client: TestClient):
    bad_id = client.post("/threads", json={"thread_id": "a b"})
    assert bad_id.status_code == 422
    assert bad_id.json()["detail"].startswith("body.thread_id: invalid thread id 'a b': use 1-64")
    bad_path = client.get("/threads/" + "x" * 65)
    assert bad_path.status_code == 400 and "invalid thread id" in bad_path.json()["detail"]
    assert client.post("/threads", json={"thread_id": "t", "colour": 1}).status_code == 422
    assert client.get("/threads?limit=0").status_code == 422

    unknown = client.post("/threads/nope/runs/stream", json={"message": "hi"})
    assert unknown.status_code == 404 and '"if_not_exists": "create"' in unknown.json()["detail"]
    both = client.post(
        "/threads/nope/runs/stream",
        json={"message": "a", "input": {"messages": [{"content": "b"}]}},
    )
    assert (
        both.status_code == 422 and 'exactly one of "message" or "input"' in both.json()["detail"]
    )
    empty = client.post("/threads/e/runs/stream", json={"message": "  ", "if_not_exists": "create"})
    assert empty.status_code == 400
    assert empty.json() == {
        "detail": "the message is empty; type something, or /exit to leave",
        "error": "bad_request",
    }
    auto = client.post(
        "/threads/e/runs/stream",
        json={"message": "hi", "approve": "auto", "if_not_exists": "create"},
    )
    assert auto.status_code == 403 and "--approve auto" in auto.json()["detail"]


@pytest.mark.dated
def test_a_run_streams_the_jsonl_events_in_order(client: TestClient):
    events = run(
        client, "w", "weather in Paris and London, which is warmer?", if_not_exists="create"
    )
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "metadata" and kinds[-2:] == ["final", "end"]
    assert all(kind == data["event"] for kind, data in events[1:-1])
    calls = [d["id"] for k, d in events if k == "tool_call"]
    results = [d["id"] for k, d in events if k == "tool_result"]
    assert len(calls) == 3 and results == calls
    for call_id in calls:
        assert kinds.index("tool_call") <= [d.get("id") for _, d in events].index(call_id)
    first_token = kinds.index("token")
    assert first_token > max(i for i, k in enumerate(kinds) if k == "tool_result")
    assert kinds[1] == "node" and kinds[first_token - 1] == "node"
    final = events[-2][1]
    answer = "".join(d["text"] for k, d in events if k == "token")
    assert final | {"answer": answer} == final
    assert final["status"] == "answered"
    assert_names_the_warmer_city(answer, forecast("Paris"), forecast("London"), chinese=False)
    assert events[-1][1]["head"] == client.get("/threads/w").json()["head"]


def test_langgraph_shaped_input_and_thread_state(client: TestClient):
    body = {
        "input": {"messages": [{"role": "user", "content": "what is 6 times 7"}]},
        "assistant_id": "waypoint",
    }
    client.post("/threads", json={"thread_id": "lg"})
    response = client.post("/threads/lg/runs/stream", json=body)
    assert parse_sse(response.text)[-2][1]["answer"] == "6 * 7 = 42"
    thread = client.get("/threads/lg").json()
    assert [m["type"] for m in thread["messages"]] == ["human", "ai", "tool", "ai"]
    assert thread["turns"] == 1 and thread["title"] == "what is 6 times 7"
    # A thread created empty is listed under its first message, not its empty first checkpoint.
    [listed] = [t for t in client.get("/threads").json() if t["thread_id"] == "lg"]
    assert listed["title"] == "what is 6 times 7"


def test_history_rollback_and_fork(client: TestClient):
    run(client, "h", "what is 6 times 7", if_not_exists="create")
    run(client, "h", "what is 2 plus 3")
    history = client.get("/threads/h/history").json()
    assert [t["turn"] for t in history["turns"]] == [2, 1]
    assert [s["turn"] for s in history["tree"]] == [1, 2] and history["tree"][1]["head"]
    turn_one_end = history["turns"][1]["checkpoint_id"]

    rolled = client.post("/threads/h/rollback", json={"turns": 1})
    assert rolled.status_code == 200
    result = rolled.json()
    assert result["target"]["checkpoint_id"] == turn_one_end
    assert result["undone_turns"] == [{"turn": 2, "preview": "what is 2 plus 3"}]
    after = client.get("/threads/h/history").json()
    assert after["head"] == result["head"] != history["head"]
    assert [t["turn"] for t in after["turns"]] == [1]
    head_segment = after["tree"][-1]
    assert head_segment["head"] and head_segment["note"] == "rollback"
    branch = after["tree"][0]["branches"][0]
    assert [s["turn"] for s in branch] == [1, 2] and not branch[-1]["on_branch"]
    assert client.get("/threads/h").json()["messages"][-1]["content"] == "6 * 7 = 42"

    too_far = client.post("/threads/h/rollback", json={"turns": 3})
    assert too_far.status_code == 400 and "roll back at most 0" in too_far.json()["detail"]
    unknown = client.post("/threads/h/rollback", json={"checkpoint_id": "ffffffffffff"})
    assert unknown.status_code == 404 and "history --thread h --all" in unknown.json()["detail"]
    neither = client.post("/threads/h/rollback", json={})
    assert neither.status_code == 422 and '"turns" or "checkpoint_id"' in neither.json()["detail"]

    forked = client.post("/threads/h/fork", json={"to": "h2", "checkpoint_id": turn_one_end[-12:]})
    assert forked.status_code == 201
    assert forked.json()["forked_from"] == {"thread_id": "h", "checkpoint_id": turn_one_end}
    assert (
        client.get("/threads/h2").json()["messages"] == client.get("/threads/h").json()["messages"]
    )
    assert client.post("/threads/h/fork", json={"to": "h2"}).status_code == 409
    assert client.post("/threads/nope/fork", json={"to": "h3"}).status_code == 404


def test_replay_reruns_a_turn_and_needs_confirm_for_side_effects(
    client: TestClient, isolated: Path
):
    run(client, "r", 'write "hello" to notes.txt', if_not_exists="create")
    checkpoints = client.get("/threads/r/history").json()["checkpoints"]
    after_input = next(c for c in checkpoints if c["turn"] == 1 and c["node"] == "input")
    before_tools = next(c for c in checkpoints if c["node"] == "agent")

    refused = client.post(
        "/threads/r/replay", json={"checkpoint_id": before_tools["checkpoint_id"]}
    )
    assert refused.status_code == 400 and '"confirm": true' in refused.json()["detail"]

    events = parse_sse(
        client.post("/threads/r/replay", json={"checkpoint_id": after_input["checkpoint_id"]}).text
    )
    notices = [d["text"] for k, d in events if k == "notice"]
    assert 'write_file not re-run: send "confirm": true to allow it' in notices
    assert events[-1][0] == "end"

    assert not (isolated / "workspace" / "notes.txt").exists()  # restored to before the turn
    confirmed = client.post(
        "/threads/r/replay", json={"checkpoint_id": after_input["checkpoint_id"], "confirm": True}
    )
    assert parse_sse(confirmed.text)[-2][1]["status"] == "answered"
    assert (isolated / "workspace" / "notes.txt").read_text() == "hello"
    tree = client.get("/threads/r/history").json()["tree"]
    head = next(s for s in flatten(tree) if s["head"])
    assert head["note"] == "replay" and head["turn"] == 1
    assert [s["note"] for s in flatten(tree)].count("replay") == 2

    finished = client.get("/threads/r").json()["head"]
    nothing = client.post("/threads/r/replay", json={"checkpoint_id": finished})
    assert nothing.status_code == 400 and "nothing to re-run" in nothing.json()["detail"]


def test_bearer_token_guards_every_route_but_health_and_the_page(isolated: Path):
    client = TestClient(
        create_app(load_settings(), api_token="s3cret"), base_url="http://localhost"
    )
    assert client.get("/health").json()["auth"] is True
    assert client.get("/").status_code == 200
    denied = client.get("/threads")
    assert denied.status_code == 401 and "Bearer" in denied.json()["detail"]
    assert denied.headers["www-authenticate"] == "Bearer"
    assert client.get("/threads", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/threads/x/runs/stream", json={"message": "hi"}).status_code == 401
    assert client.get("/threads", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_graph_route_has_the_mermaid_diagram(client: TestClient):
    graph = client.get("/graph").json()
    assert "agent -.-> tools;" in graph["mermaid"] and "retry --> agent;" in graph["mermaid"]
    assert {"source": "tools", "target": "agent", "conditional": True} in graph["edges"]


def test_a_run_can_choose_the_strategy_and_the_thread_keeps_it(client: TestClient):
    events = run(client, "st", "what is 6 times 7", if_not_exists="create", strategy="plan")
    kinds = [kind for kind, _ in events]
    assert "plan" in kinds and kinds.index("plan") < kinds.index("final")
    assert [d["node"] for k, d in events if k == "node"] == ["planner", "executor", "synthesizer"]
    again = run(client, "st", "what is 1 plus 1")  # no strategy: the thread's own
    assert "plan" in [kind for kind, _ in again]
    bad = client.post("/threads/st/runs/stream", json={"message": "hi", "strategy": "nope"})
    assert bad.status_code == 422 and "strategy" in bad.text
