"""How a run's final values are answered (`runs/wait`, `join`): the same JSON as before, written
faster, whatever the state holds; a run that ran to its end answers the head it streamed, still the
thread's head, without rebuilding it."""

from __future__ import annotations

import json

import pytest
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage, HumanMessage

from app.server.standard.run_streams import ValuesResponse
from app.server.standard.wire import jsonable
from app.service import api
from tests.app_client import app_client, wait


def test_a_state_is_answered_byte_for_byte_as_starlette_would():
    state = jsonable(
        {
            "messages": [
                HumanMessage("Zürich or Köln? 🌧", id="h1"),
                AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {"x": 1.5}, "id": "c"}]),
            ],
            "turn": 3,
            "notes": None,
        }
    )
    assert ValuesResponse(state).body == JSONResponse(state).body


def test_an_integer_over_64_bits_is_still_answered():
    answer = ValuesResponse({"total": 2**70})
    assert json.loads(answer.body) == {"total": 2**70}


@pytest.fixture
def client() -> TestClient:
    return app_client()


def test_a_run_that_ran_to_its_end_answers_the_head_it_streamed_without_rebuilding_it(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
):
    wait(client, "t", "what is 2 plus 3")
    rebuilt: list[str] = []
    head_state = api.head_state

    def counted(database, thread_id, checkpoint_id=None):  # type: ignore[no-untyped-def]
        rebuilt.append(thread_id)
        return head_state(database, thread_id, checkpoint_id)

    monkeypatch.setattr(api, "head_state", counted)
    values = wait(client, "t", "what is 4 plus 5")
    assert rebuilt == []
    state = client.get("/threads/t/state").json()
    assert values == state["values"] and values["status"] == "answered"
    assert "9" in values["messages"][-1]["content"]


def test_a_turn_whose_outcome_is_written_after_its_stream_answers_that_outcome(
    client: TestClient,
):
    """The offline model answers an empty corpus's search; the turn is then marked failed (a write
    after the run's last streamed checkpoint), and the answer says so, as the thread does."""
    values = wait(client, "f", "search for release checklist")
    assert values["status"] == "failed"
    assert values == client.get("/threads/f/state").json()["values"]
