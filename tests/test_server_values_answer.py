"""How a run's final values are answered (`runs/wait`, `join`): the same JSON as before, written
faster, whatever the state holds."""

from __future__ import annotations

import json

from fastapi.responses import JSONResponse
from langchain_core.messages import AIMessage, HumanMessage

from app.server.standard.run_streams import ValuesResponse
from app.server.standard.wire import jsonable


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
