"""A run on a thread that exists opens only its runtime's connections (the checkpoints and the
memory): its thread is checked on the connection the server keeps for the run records."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.server.api import create_app


def wait(client: TestClient, thread: str, text: str) -> None:
    body = {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": text}]},
        "if_not_exists": "create",
    }
    answer = client.post(f"/threads/{thread}/runs/wait", json=body)
    assert answer.status_code == 200, answer.text


def test_a_run_on_a_thread_that_exists_opens_only_its_runtimes_connections(
    monkeypatch: pytest.MonkeyPatch,
):
    client = TestClient(create_app(load_settings()), base_url="http://localhost")
    wait(client, "c", "what is 1 plus 1")
    opened: list[str] = []
    connect = sqlite3.connect

    def counted(path, *args, **options):  # type: ignore[no-untyped-def]
        opened.append(str(path))
        return connect(path, *args, **options)

    monkeypatch.setattr(sqlite3, "connect", counted)
    wait(client, "c", "what is 2 plus 2")
    assert len(opened) == 2


def test_a_missing_thread_is_still_made_or_refused():
    client = TestClient(create_app(load_settings()), base_url="http://localhost")
    wait(client, "made", "what is 1 plus 1")
    body = {"assistant_id": "waypoint", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    answer = client.post("/threads/missing/runs/wait", json=body)
    assert answer.status_code == 404 and "POST /threads" in answer.json()["detail"]
