"""The store API and run inputs no client should send, sent anyway: each is a 4xx with the usual
JSON body (`detail` says what to fix), never a 500 or an "internal error" in a 200."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.server.api import create_app

BAD_STORE_CALLS = [
    ("PUT", "/store/items", {"namespace": ["a.b", "c"], "key": "k", "value": {"text": "x"}}),
    ("PUT", "/store/items", {"namespace": ["", "c"], "key": "k", "value": {"text": "x"}}),
    ("PUT", "/store/items", {"namespace": ["langgraph", "c"], "key": "k", "value": {"a": 1}}),
    ("POST", "/store/items/search", {"namespace_prefix": ["other"], "filter": {"$or": [1]}}),
    ("POST", "/store/items/search", {"namespace_prefix": ["other"], "filter": {"a'b": 1}}),
    ("POST", "/store/items/search", {"namespace_prefix": ["memories"], "filter": {"$or": [1]}}),
    ("POST", "/store/items/search", {"filter": {"a": {"$regex": "x"}}}),
    ("POST", "/store/items/search", {"filter": {"a": {"$eq": [1, 2]}}}),
    ("POST", "/store/items/search", {"namespace_prefix": ["a.b"]}),
    ("POST", "/store/namespaces", {"max_depth": -1}),
    ("DELETE", "/store/items", {"namespace": ["x.y"], "key": "k"}),
]


@pytest.fixture
def client() -> TestClient:
    app = create_app(load_settings())
    return TestClient(app, base_url="http://localhost", raise_server_exceptions=False)


@pytest.mark.parametrize(("method", "path", "body"), BAD_STORE_CALLS)
def test_a_bad_store_call_is_a_4xx_with_a_reason(client: TestClient, method, path, body):
    response = client.request(method, path, json=body)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"]


def test_a_plain_filter_still_works(client: TestClient):
    client.put("/store/items", json={"namespace": ["notes"], "key": "a", "value": {"n": 1}})
    client.put("/store/items", json={"namespace": ["notes"], "key": "b", "value": {"n": 5}})
    found = client.post(
        "/store/items/search", json={"namespace_prefix": ["notes"], "filter": {"n": {"$gt": 2}}}
    )
    assert [item["key"] for item in found.json()["items"]] == ["b"]


def test_a_lone_surrogate_in_a_message_is_replaced_not_an_internal_error(client: TestClient):
    client.post("/threads", json={"thread_id": "s"}).raise_for_status()
    body = (
        '{"assistant_id": "waypoint", "input": {"messages": [{"role": "user", '
        '"content": "what is 1 plus 1 \\ud800"}]}}'
    )
    response = client.post(
        "/threads/s/runs/wait", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200 and "__error__" not in response.json(), response.text
    human = [m for m in response.json()["messages"] if m["type"] == "human"]
    assert human[0]["content"] == "what is 1 plus 1 \ufffd"
    assert response.json()["messages"][-1]["content"] == "1 + 1 = 2"
