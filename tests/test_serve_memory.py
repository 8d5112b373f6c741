"""What a run leaves in serve's memory: a `values` event is the whole state, so each message of it
is dumped once per run and only for a client that asked for `values`; after runs, an idle server
frees what they left (at most once a second)."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from app.config import load_settings
from app.server.standard import runs
from app.server.standard.runs import Run, Runs, StandardSink
from app.service.events import NodeUpdate, StateValues


def new_run() -> Run:
    return Run("r1", "t1", "waypoint", {}, "enqueue", {})


def test_the_values_events_of_a_run_share_each_messages_json():
    run = new_run()
    sink = StandardSink(run, ["values"], subgraphs=False)
    question = HumanMessage("what is 6 times 7", id="h1")
    answer = AIMessage("42", id="a1")
    sink.emit(StateValues({"messages": [question]}))
    sink.emit(StateValues({"messages": [question, answer]}))
    (_, first), (_, second) = run.kept_events()
    assert second["messages"] == [question.model_dump(mode="json"), answer.model_dump(mode="json")]
    assert first["messages"][0] is second["messages"][0]  # one dump, not one per event


def test_a_values_event_no_client_asked_for_is_not_turned_into_json(monkeypatch):
    dumped: list = []
    monkeypatch.setattr(runs, "jsonable", lambda value, *rest: dumped.append(value) or value)
    run = new_run()
    sink = StandardSink(run, ["updates"], subgraphs=False)
    sink.emit(StateValues({"messages": [HumanMessage("hi", id="h1")]}))
    sink.emit(NodeUpdate("agent", {"turn": 1}))
    assert dumped == [{"turn": 1}] and [name for name, _ in run.kept_events()] == ["updates"]


def test_an_idle_server_tidies_its_heap_after_runs_at_most_once_a_second(
    monkeypatch, tmp_path: Path
):
    tidied: list[float] = []
    clock = [100.0]
    monkeypatch.setattr(runs, "tidy_heap", lambda: tidied.append(clock[0]))
    monkeypatch.setattr(runs.time, "monotonic", lambda: clock[0])
    server = Runs(load_settings(db=tmp_path / "agent.sqlite", workspace=tmp_path))
    server.tidy_when_idle()
    clock[0] += 0.5
    server.tidy_when_idle()  # too soon
    clock[0] += 1
    server.adopt(new_run())
    server.tidy_when_idle()  # another run is live here
    server.forget(new_run())
    server.tidy_when_idle()
    assert tidied == [100.0, 101.5]
