"""Waypoint's graphs under LangGraph's own `auth` section (app/server/langgraph_auth.py): the users
file's tokens, each user's threads and store items their own, and the agent's memory (with
APP_MEMORY_SCOPE=user) under the authenticated user's scope, so one user's run never recalls
another's facts."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from langgraph_sdk import Auth, get_sync_client

from app.server import langgraph_auth
from app.server.tokens import add_user
from bench.serve_speed import langgraph_dev as started_langgraph_dev
from tests.sdk_scenario import answer, user
from tests.test_langgraph_api import REPO, needs_langgraph_cli


def as_caller(name: str) -> SimpleNamespace:
    return SimpleNamespace(user=SimpleNamespace(identity=name))


def test_the_handler_knows_a_users_token_and_refuses_any_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("APP_USERS_FILE", str(tmp_path / "users.json"))
    monkeypatch.setattr(langgraph_auth, "_users", None)
    token = add_user(tmp_path / "users.json", "alice")
    found = asyncio.run(langgraph_auth.authenticate(f"Bearer {token}"))
    assert found == {"identity": "alice"}
    for wrong in (None, "Bearer nope", f"Basic {token}"):
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            asyncio.run(langgraph_auth.authenticate(wrong))
        assert refused.value.status_code == 401


def test_the_handler_makes_threads_their_creators_and_scopes_the_store():
    made = {"thread_id": "t", "metadata": {"owner": "bob", "topic": "x"}}
    assert asyncio.run(langgraph_auth.own_threads(as_caller("alice"), made)) == {"owner": "alice"}
    assert made["metadata"] == {"owner": "alice", "topic": "x"}  # a forged owner is overwritten
    put = {"namespace": ("memories", "bob"), "key": "k", "value": {"text": "x"}}
    asyncio.run(langgraph_auth.own_store(as_caller("alice"), put))
    assert put["namespace"] == ("users", "alice", "memories", "bob")


@pytest.fixture(scope="module")
def authed_langgraph_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    tmp = tmp_path_factory.mktemp("langgraph-auth")
    tokens = {name: add_user(tmp / "users.json", name) for name in ("alice", "bob")}
    config = json.loads((REPO / "langgraph.json").read_text())
    config["auth"] = {"path": "./app/server/langgraph_auth.py:auth"}
    (tmp / "langgraph.json").write_text(json.dumps(config))
    env = {**os.environ, "APP_USERS_FILE": str(tmp / "users.json"), "APP_MEMORY_SCOPE": "user"}
    with started_langgraph_dev(tmp, tmp / "workspace", env, tmp / "langgraph.json") as (_, base):
        yield base, tokens


@needs_langgraph_cli
def test_under_langgraph_auth_each_user_sees_only_their_threads_and_memory(
    authed_langgraph_dev: tuple[str, dict],
):
    base, tokens = authed_langgraph_dev
    alice, bob = (
        get_sync_client(url=base, headers={"Authorization": f"Bearer {tokens[who]}"})
        for who in ("alice", "bob")
    )
    assert httpx.post(f"{base}/threads/search", json={}, timeout=10).status_code in (401, 403)
    context = {"model": "offline", "user": "me"}
    thread = alice.threads.create()["thread_id"]
    told = alice.runs.wait(
        thread,
        "waypoint",
        input=user("remember that my favourite colour is green"),
        context=context,
    )
    assert "green" in answer(told)
    with pytest.raises(httpx.HTTPStatusError) as hidden:
        bob.threads.get(thread)
    assert hidden.value.response.status_code == 404
    assert [t["thread_id"] for t in bob.threads.search()] == []
    assert [i["value"]["text"] for i in alice.store.search_items(["memories", "me"])["items"]] == [
        "my favourite colour is green"
    ]
    assert bob.store.search_items(["memories", "me"])["items"] == []
    bobs = bob.threads.create()["thread_id"]
    asked = bob.runs.wait(
        bobs, "waypoint", input=user("do you remember my favourite colour?"), context=context
    )
    assert "green" not in answer(asked)
