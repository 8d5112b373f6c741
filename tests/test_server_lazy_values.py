"""A run's `values` events (the whole state after each step) are turned into JSON only when a
client reads them, once, and as the state was at that step."""

from __future__ import annotations

import asyncio

from langchain_core.messages import HumanMessage

from app.server.standard.runs import END, Run, StandardSink, stream_events
from app.server.standard.wire import as_data
from app.service.events import StateValues


class Probe:
    """A value the wire writes as its text: counts how often it was turned into JSON."""

    def __init__(self) -> None:
        self.written = 0

    def __str__(self) -> str:
        self.written += 1
        return "probe"


def values_run() -> tuple[Run, StandardSink]:
    run = Run("r", "t", "a", {}, "enqueue", {})
    return run, StandardSink(run, ["values"], subgraphs=False)


def test_a_state_nobody_reads_is_not_turned_into_json():
    run, sink = values_run()
    probe = Probe()
    sink.emit(StateValues({"note": probe}))
    assert [name for name, _ in run.kept_events()] == ["values"]
    assert probe.written == 0


def test_a_state_is_turned_into_json_once_for_every_reader():
    run, sink = values_run()
    probe = Probe()
    sink.emit(StateValues({"note": probe}))
    ((_, data),) = run.kept_events()
    assert as_data(data) == as_data(data) == {"note": "probe"}
    assert probe.written == 1


def test_a_state_read_later_is_the_state_of_its_step():
    run, sink = values_run()
    messages = [HumanMessage("first", id="h1")]
    sink.emit(StateValues({"messages": messages}))
    messages.append(HumanMessage("later", id="h2"))
    ((_, data),) = run.kept_events()
    assert [m["content"] for m in as_data(data)["messages"]] == ["first"]


def test_a_client_that_joins_late_reads_the_states_as_json():
    run, sink = values_run()
    sink.emit(StateValues({"turn": 1, "messages": [HumanMessage("hi", id="h1")]}))
    run.publish(END, None)

    async def joined() -> list:
        return [item async for item in stream_events(run, cancel_on_disconnect=False)]

    ((name, data),) = asyncio.run(joined())
    assert name == "values" and data["turn"] == 1
    assert data["messages"][0]["content"] == "hi" and data["messages"][0]["type"] == "human"
