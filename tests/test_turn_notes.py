"""Past experience goes to the model with the user's message (after the fixed prompt), but it is not
the request: the offline model answers what the user asked, not what an earlier thread asked."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from app.models.offline import OfflineChatModel
from graphs.shared.messages import USER_TEXT, for_model, without_notes
from tests.conftest import run_cli
from tools import default_tools

NOTES = "Past experience: task: what is 1 plus 0 | tools: calculator | outcome: answered — 1."


def test_notes_go_in_front_of_the_users_words_which_stay_recoverable(tmp_path):
    [noted] = for_model([HumanMessage("what is 1 plus 1", id="h1")], NOTES)
    assert noted.content == f"{NOTES}\n\nwhat is 1 plus 1"
    assert noted.additional_kwargs[USER_TEXT] == "what is 1 plus 1"
    assert without_notes(noted) == HumanMessage("what is 1 plus 1", id="h1")


def test_the_offline_model_answers_the_request_not_the_notes(tmp_path):
    model = OfflineChatModel().bind_tools(default_tools(tmp_path))
    reply = model.invoke(for_model([HumanMessage("what is 1 plus 1")], NOTES))
    assert [c["args"] for c in reply.tool_calls] == [{"expression": "1 + 1"}]


def test_a_second_thread_is_not_answered_with_the_first_threads_question():
    assert run_cli("chat", "-t", "first", "-m", "what is 1 plus 0").returncode == 0
    second = run_cli("chat", "-t", "second", "-m", "what is 1 plus 1")
    assert second.returncode == 0
    assert "1 + 1 = 2" in second.stdout.decode()
