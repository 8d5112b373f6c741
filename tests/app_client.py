"""The server app in the test's process (FastAPI's TestClient on `create_app`), and a waited run on
it: for tests of how runs are made, answered and kept, without a server process."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.config import load_settings
from app.server.api import create_app


def app_client() -> TestClient:
    return TestClient(create_app(load_settings()), base_url="http://localhost")


def wait(client: TestClient, thread: str, text: str) -> dict:
    """`runs/wait` of a user message on `thread` (made if missing): its values."""
    body = {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": text}]},
        "if_not_exists": "create",
    }
    answer = client.post(f"/threads/{thread}/runs/wait", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()
