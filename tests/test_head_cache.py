"""The chat path reuses the head it streamed instead of rebuilding it, but never a stale one."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from app.cli.render import JsonlRenderer
from app.config import load_settings
from app.service.context import make_context
from app.service.session import ChatSession
from app.service.threads import load_state
from app.store import open_checkpointer
from graphs.strategies import STRATEGIES
from tests.fakes import ScriptedChatModel, call


class _Sink:
    def __init__(self) -> None:
        self.file = self

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def session_on(saver, thread: str, script: list, approval: str = "auto") -> ChatSession:
    settings = load_settings()
    context = make_context(settings, ScriptedChatModel(script=script), approval=approval)
    return ChatSession(settings, saver, thread, context)


def test_the_streamed_head_equals_a_full_load():
    with open_checkpointer(load_settings().db) as saver:
        session = session_on(
            saver,
            "t",
            [AIMessage("", tool_calls=[call("calculator", {"expression": "6*7"})]), "42"],
        )
        session.run_turn("what is 6 times 7", JsonlRenderer(_Sink()))
        cached, loaded = session.head.load(), load_state(session.graph, "t")
        assert cached.config == loaded.config
        assert cached.values == loaded.values
        assert cached.next == loaded.next == ()
        assert cached.metadata["turn"] == loaded.metadata["turn"] == 1


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_the_head_after_a_turn_of_each_strategy_is_the_stored_head(strategy: str):
    """Its state, checkpoint, parent and metadata: the offline model's turns, tools and the
    strategies' subgraphs (whose own states and checkpoints are never the thread's)."""
    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, "t", make_context(settings), strategy=strategy)
        for text in ("what is 6 times 7", "what is the weather in Paris"):
            session.run_turn(text, JsonlRenderer(_Sink()))
            cached, loaded = session.head.load(), load_state(session.graph, "t")
            assert cached.config == loaded.config and cached.values == loaded.values
            assert cached.parent_config == loaded.parent_config
            assert json.loads(json.dumps(cached.metadata)) == loaded.metadata  # stored as JSON
            assert cached.next == loaded.next == ()


def test_a_turn_written_by_another_session_is_seen():
    with open_checkpointer(load_settings().db) as saver:
        first = session_on(saver, "t", ["one", "three"])
        second = session_on(saver, "t", ["two"])
        first.run_turn("hello", JsonlRenderer(_Sink()))
        second.run_turn("again", JsonlRenderer(_Sink()))
        assert first.turns() == 2
        result = first.run_turn("third", JsonlRenderer(_Sink()))
        assert result.turn == 3
        contents = [m.content for m in load_state(first.graph, "t").values["messages"]]
        assert contents == ["hello", "one", "again", "two", "third", "three"]


def test_a_paused_turn_is_never_taken_from_the_stream():
    edit = {"path": "a.txt", "old_text": "x", "new_text": "y"}
    risky = AIMessage("", tool_calls=[call("edit_file", edit)])
    settings = load_settings()
    settings.workspace.mkdir(parents=True, exist_ok=True)
    (settings.workspace / "a.txt").write_text("x")
    with open_checkpointer(settings.db) as saver:
        session = session_on(saver, "t", [risky, "written"], approval="ask")
        seen: list[list[dict]] = []

        def approver(calls: list[dict]) -> dict[str, dict]:
            seen.append(calls)
            # While the turn is paused, the head is the paused one with its pending approval.
            assert session.pending_approval(session.head.load())
            return {c["id"]: {"action": "approve"} for c in calls}

        result = session.run_turn("edit a.txt", JsonlRenderer(_Sink()), approver)
        assert seen and result.answer == "written"
        assert (settings.workspace / "a.txt").read_text() == "y"
        assert session.head.load().values == load_state(session.graph, "t").values
