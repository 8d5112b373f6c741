"""A run streams the model's tokens only for a client that reads them (stream modes `messages`,
`messages-tuple`, `events`); the answer is the same either way."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.models.offline import OfflineChatModel
from app.server.api import create_app
from tests.server_process import parse_sse


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(load_settings()), base_url="http://localhost")


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The offline model's streamed calls (LangChain streams a call when its tokens are read)."""
    calls: list[str] = []
    original = OfflineChatModel._stream

    def recorded(self: OfflineChatModel, *args: object, **kwargs: object) -> Iterator:
        calls.append("stream")
        yield from original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(OfflineChatModel, "_stream", recorded)
    return calls


def body(text: str, **extra: object) -> dict:
    return {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": text}]},
        "if_not_exists": "create",
        **extra,
    }


def test_a_run_whose_tokens_nobody_reads_calls_the_model_unstreamed(
    client: TestClient, streamed: list[str]
):
    answer = client.post("/threads/w/runs/wait", json=body("what is 2 plus 3"))
    assert answer.status_code == 200 and streamed == []
    assert "5" in answer.json()["messages"][-1]["content"]

    updates = client.post("/threads/u/runs/stream", json=body("what is 2 plus 3"))
    assert updates.status_code == 200 and streamed == []


@pytest.mark.parametrize("mode", ["messages-tuple", "messages", "events"])
def test_a_client_reading_tokens_gets_them(client: TestClient, streamed: list[str], mode: str):
    response = client.post(
        "/threads/s/runs/stream", json=body("what is 2 plus 3", stream_mode=[mode, "values"])
    )
    events = parse_sse(response.text)
    assert streamed, "the model was not streamed"
    token_events = [kind for kind, _ in events if kind.startswith("messages") or kind == "events"]
    assert token_events, [kind for kind, _ in events]
    last_values = [data for kind, data in events if kind == "values"][-1]
    unstreamed = client.post("/threads/w/runs/wait", json=body("what is 2 plus 3")).json()
    assert last_values["messages"][-1]["content"] == unstreamed["messages"][-1]["content"]
