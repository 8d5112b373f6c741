"""Stopping a running turn from another thread (the server's cancel route): the run ends after the
step in progress, what that step finished is kept, open calls are closed, and nothing of the run is
written after the close."""

from __future__ import annotations

import dataclasses
import io
import threading
import time

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from app.cli.render import JsonlRenderer
from app.config import load_settings
from app.service.context import make_context
from app.service.events import Event, ToolCallStarted
from app.service.session import ChatSession, TurnInterrupted
from app.store import open_checkpointer
from graphs.shared.messages import dangling_tool_calls
from tests.fakes import ScriptedChatModel, call


class _Sink:
    file = io.StringIO()


def slow_session(saver, started: threading.Event, script: list) -> ChatSession:
    """A session whose tool, once started, holds until the session is asked to stop."""
    sessions: list[ChatSession] = []

    @tool
    def slow_step(label: str) -> str:
        """Take a while (test tool)."""
        started.set()
        assert sessions[0].stop.wait(timeout=60), "nobody asked the turn to stop"
        return f"finished {label}"

    settings = load_settings()
    context = make_context(settings, ScriptedChatModel(script=script))
    sessions.append(
        ChatSession(settings, saver, "t", dataclasses.replace(context, tools=[slow_step]))
    )
    return sessions[0]


def stop_when(event: threading.Event, session: ChatSession) -> None:
    def stopper() -> None:
        event.wait(timeout=60)
        session.stop.set()

    threading.Thread(target=stopper, daemon=True).start()


def test_stop_during_a_tool_keeps_its_result_and_closes_the_turn():
    started = threading.Event()
    slow_call = AIMessage("", tool_calls=[call("slow_step", {"label": "A"}, "slow-1")])
    with open_checkpointer(load_settings().db) as saver:
        session = slow_session(saver, started, [slow_call, "second answer"])
        stop_when(started, session)
        with pytest.raises(TurnInterrupted):
            session.run_turn("go", JsonlRenderer(_Sink()))
        head = session.graph.get_state(session.config)
        messages = head.values["messages"]
        assert head.next == () and head.values["status"] == "cancelled"
        assert not dangling_tool_calls(messages)
        assert isinstance(messages[-1], ToolMessage) and messages[-1].content == "finished A"
        closed_at = head.config["configurable"]["checkpoint_id"]
        time.sleep(0.3)  # the stopped worker writes nothing more
        assert session.graph.get_state(session.config).config["configurable"]["checkpoint_id"] == (
            closed_at
        )

        session.stop.clear()
        result = session.run_turn("again", JsonlRenderer(_Sink()))
        assert result.status == "answered" and result.answer == "second answer"


def test_a_stop_before_the_turn_starts_closes_it_at_once():
    with open_checkpointer(load_settings().db) as saver:
        session = slow_session(saver, threading.Event(), ["unused"])
        session.stop.set()
        with pytest.raises(TurnInterrupted):
            session.run_turn("go", JsonlRenderer(_Sink()))
        head = session.graph.get_state(session.config)
        assert head.values["status"] == "cancelled" and head.next == ()


class CtrlCAtTheFirstTool:
    """A terminal whose user presses Ctrl-C as soon as a tool starts."""

    def emit(self, event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            raise KeyboardInterrupt

    def partial_answer(self) -> str:
        return ""


def test_ctrl_c_closes_the_turn_at_once_and_the_worker_writes_nothing_after():
    """Ctrl-C does not wait for the step in progress (a tool still running): the turn is closed at
    once, and when the worker finishes that step later, nothing of it reaches the thread."""
    release = threading.Event()

    @tool
    def slow_step(label: str) -> str:
        """Take a while (test tool)."""
        assert release.wait(timeout=60), "the test never released the tool"
        return f"finished {label}"

    slow_call = AIMessage("", tool_calls=[call("slow_step", {"label": "A"}, "slow-1")])
    settings = load_settings()
    context = make_context(settings, ScriptedChatModel(script=[slow_call, "second answer"]))
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, "t", dataclasses.replace(context, tools=[slow_step]))
        with pytest.raises(TurnInterrupted):
            session.run_turn("go", CtrlCAtTheFirstTool())
        closed = session.graph.get_state(session.config)
        assert closed.values["status"] == "cancelled" and closed.next == ()

        [worker] = [t for t in threading.enumerate() if t.name == "turn-t"]
        assert worker.is_alive()  # still in the tool: the close did not wait for it
        release.set()
        worker.join(timeout=60)
        assert not worker.is_alive()

        head = session.graph.get_state(session.config)
        assert head.config == closed.config
        # The step's late result is not written: not even as a pending write of the step's
        # checkpoint, which the messages of every later checkpoint are rebuilt from.
        results = [m.content for m in head.values["messages"] if isinstance(m, ToolMessage)]
        assert results == ["not run: interrupted by the user"]
        assert not dangling_tool_calls(head.values["messages"])

        result = session.run_turn("again", JsonlRenderer(_Sink()))
        assert result.status == "answered" and result.answer == "second answer"
