"""Past experience goes to the model as a system section of its own just before the user's message
(after the fixed prompt), not as words of the user: the offline model answers what the user asked,
not what an earlier thread asked."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from app.models.offline import OfflineChatModel
from graphs.shared.messages import for_model, is_notes
from tests.conftest import run_cli
from tools import default_tools

NOTES = 'Reference data (may be out of date):\n- "what is 1 plus 0" → calculator: "1"'


def test_notes_are_a_system_section_before_the_users_words_which_stay_as_written():
    asked = HumanMessage("what is 1 plus 1", id="h1")
    section, said = for_model([asked], NOTES)
    assert isinstance(section, SystemMessage) and is_notes(section)
    assert section.content == NOTES
    assert said == asked


def test_without_notes_the_conversation_is_sent_as_it_is():
    asked = HumanMessage("what is 1 plus 1", id="h1")
    assert for_model([asked], "") == [asked]
    assert not is_notes(SystemMessage("You are Waypoint."))


def test_the_offline_model_answers_the_request_not_the_notes(tmp_path):
    model = OfflineChatModel().bind_tools(default_tools(tmp_path))
    reply = model.invoke(for_model([HumanMessage("what is 1 plus 1")], NOTES))
    assert [c["args"] for c in reply.tool_calls] == [{"expression": "1 + 1"}]


def test_a_second_thread_is_not_answered_with_the_first_threads_question():
    assert run_cli("chat", "-t", "first", "-m", "what is 1 plus 0").returncode == 0
    second = run_cli("chat", "-t", "second", "-m", "what is 1 plus 1")
    assert second.returncode == 0
    assert "1 + 1 = 2" in second.stdout.decode()
