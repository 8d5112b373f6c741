"""Turns tell the truth to the person at the terminal: what was written for the model is never shown
as the answer, a turn whose requested action failed is `failed` with exit status 1, reflexion says
a failure once and does not repeat the call its lesson ruled out, a plan saves readable text, and
the offline planner answers what was asked."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from app.config import load_settings
from app.service.events import Event, ToolCallStarted
from app.service.runtime import open_runtime
from app.service.session import TurnInterrupted
from tests.conftest import run_cli
from tests.fakes import ScriptedChatModel, ai_calls, call
from tests.openai_server import OpenAIServer, error
from tests.openai_server import openai_server as openai_server  # the fixture

MODEL_ADVICE = ("tell the user", "use list_files", "Do not retry it unchanged", "ask the user")


def everything(result) -> str:  # type: ignore[no-untyped-def]
    return result.stdout.decode() + result.stderr.decode()


def test_a_search_of_an_empty_corpus_shows_the_users_wording_and_fails():
    result = run_cli("chat", "-t", "s", "-m", "search for release checklist")

    assert result.returncode == 1
    for advice in MODEL_ADVICE:
        assert advice not in everything(result)
    assert "the document corpus is empty; add documents with: waypoint corpus add PATH" in (
        result.stderr.decode()
    )
    assert "↻" not in result.stderr.decode()  # a tool error is no retry line
    assert result.stdout.decode().startswith("web_search failed: the document corpus is empty")
    [turn] = json.loads(run_cli("history", "-t", "s", "--json").stdout)
    assert turn["status"] == "failed"


def test_a_refused_approval_is_not_a_retry_and_not_model_advice(isolated: Path):
    assert run_cli("chat", "-t", "w", "-m", 'write "v1" to a.txt').returncode == 0

    result = run_cli("chat", "-t", "w", "-m", 'write "v2" to a.txt')

    assert (isolated / "workspace" / "a.txt").read_text() == "v1"
    assert result.returncode == 1  # what was asked was not done
    assert "↻" not in result.stderr.decode()
    for advice in MODEL_ADVICE:
        assert advice not in everything(result)
    assert result.stdout.decode() == (
        "write_file(a.txt) failed: not run: it overwrites the existing file 'a.txt' and was not "
        "approved (the approval policy is 'never')\n"
    )


def test_a_recall_in_another_thread_is_not_phrased_as_a_save():
    assert run_cli("chat", "-t", "one", "-m", "remember that my name is Ada").returncode == 0

    result = run_cli("chat", "-t", "two", "-m", "Do you remember what my name is?")

    answer = result.stdout.decode()
    assert "I'll remember" not in answer and "Got it" not in answer
    assert "my name is Ada" in answer


def test_reading_a_missing_file_exits_1_and_history_says_failed():
    result = run_cli("chat", "-t", "r", "-m", "read missing.txt")

    assert result.returncode == 1
    assert result.stdout.decode() == (
        "read_file(missing.txt) failed: file 'missing.txt' does not exist in the workspace\n"
    )
    [turn] = json.loads(run_cli("history", "-t", "r", "--json").stdout)
    assert turn["status"] == "failed"
    final = json.loads(
        run_cli("chat", "-t", "r", "--jsonl", "-m", "read missing.txt").stdout.splitlines()[-1]
    )
    assert final["event"] == "final" and final["status"] == "failed"


class Quiet:
    def emit(self, event: Event) -> None:
        return None

    def partial_answer(self) -> str:
        return ""


def test_a_failed_call_made_good_by_a_later_step_leaves_the_turn_answered(isolated: Path):
    (isolated / "workspace").mkdir()
    (isolated / "workspace" / "notes.txt").write_text("hello")
    model = ScriptedChatModel(
        script=[
            ai_calls(call("read_file", {"path": "note.txt"}, "c1")),
            ai_calls(call("read_file", {"path": "notes.txt"}, "c2")),
            "notes.txt says hello.",
        ]
    )
    with open_runtime(load_settings(), model=model) as runtime:
        result = runtime.session("fixed").run_turn("read my notes", Quiet())
    assert result.status == "answered"


def test_one_call_failing_beside_one_that_succeeded_is_a_failed_turn():
    result = run_cli("chat", "-t", "half", "-m", "weather in Paris and Atlantis")
    assert result.returncode == 1
    assert "get_weather(Atlantis) failed" in result.stdout.decode()


def test_reflexion_says_the_failure_once_and_never_repeats_the_ruled_out_call():
    result = run_cli(
        "chat", "-t", "rx", "--strategy", "reflexion", "--jsonl", "-m", "read missing.txt"
    )

    events = [json.loads(line) for line in result.stdout.splitlines()]
    calls = [(e["name"], e["args"]) for e in events if e["event"] == "tool_call"]
    assert calls == [("read_file", {"path": "missing.txt"})]  # attempts 2 and 3 heed the lesson
    lessons = [e["lesson"] for e in events if e["event"] == "lesson"]
    assert 'Do not call read_file {"path": "missing.txt"} again' in lessons[0]
    assert events[-1]["status"] == "failed"
    assert result.returncode == 1

    shown = run_cli("chat", "-t", "rx2", "--strategy", "reflexion", "-m", "read missing.txt")
    assert shown.returncode == 1
    assert shown.stdout.decode().count("\n") == 1  # one answer, not one per attempt
    assert shown.stderr.decode().count("does not exist in the workspace") == 2  # card, lesson


def test_a_lesson_from_another_thread_does_not_stop_the_call_now(isolated: Path):
    run_cli("chat", "-t", "before", "--strategy", "reflexion", "-m", "read missing.txt")
    (isolated / "workspace" / "missing.txt").write_text("found now")

    later = run_cli("chat", "-t", "after", "--strategy", "reflexion", "-m", "read missing.txt")

    assert later.returncode == 0, later.stderr.decode()
    assert "found now" in later.stdout.decode()


def test_plan_and_solve_saves_the_readable_sentences_not_raw_json(isolated: Path):
    result = run_cli(
        "chat",
        "-t",
        "trip",
        "--strategy",
        "plan",
        "-m",
        "weather in Paris and Rome, which is warmer? save it to trip.txt",
    )

    assert result.returncode == 0, result.stderr.decode()
    saved = (isolated / "workspace" / "trip.txt").read_text().splitlines()
    answer = result.stdout.decode().splitlines()
    assert saved == answer[:3]  # "Paris on …: …, high …, low …." as the answer says it
    assert re.fullmatch(r"Paris on \S+: .+, high -?\d+°C, low -?\d+°C\.", saved[0])
    assert re.fullmatch(r"Difference: (Rome|Paris) is \d+°C warmer than (Paris|Rome) .*", saved[2])
    assert "{" not in "".join(saved)


@pytest.mark.dated
def test_which_one_was_colder_names_the_colder_city():
    run_cli("chat", "-t", "c", "-m", "weather in Paris and Rome")
    answer = run_cli("chat", "-t", "c", "-m", "which one was colder?").stdout.decode()
    assert re.search(r"Difference: \w+ is \d+°C colder than \w+", answer), answer


def test_the_second_half_of_a_chained_calculation_is_not_dropped():
    result = run_cli("chat", "-t", "z", "-m", "(2+3)*4 and then divide by zero")

    assert result.stdout.decode() == (
        "(2+3)*4 = 20\ncalculator(20 / 0) failed: division by zero in '20 / 0'; check the divisor\n"
    )
    assert result.returncode == 1
    assert run_cli("chat", "-t", "z2", "-m", "what is 1 plus 1, then multiply by 3").stdout == (
        b"1 + 1 = 2\n2 * 3 = 6\n"
    )


def test_the_offline_fallback_names_what_it_can_do():
    answer = run_cli("chat", "-t", "f", "-m", "write me a poem").stdout.decode()
    assert "weather for 40 cities" in answer
    for skill in ("Python", "search the documents", "remember facts"):
        assert skill in answer


def test_a_turn_stopped_by_ctrl_c_is_cancelled_in_history_and_in_the_tree():
    """Stopped the way the server's cancel does (the same close as Ctrl-C; Ctrl-C itself is
    tests/test_cancel.py's)."""

    class StopAtTheFirstTool:
        def __init__(self, stop: threading.Event) -> None:
            self.stop = stop

        def emit(self, event: Event) -> None:
            if isinstance(event, ToolCallStarted):
                self.stop.set()

        def partial_answer(self) -> str:
            return ""

    run_cli("chat", "-t", "stop", "-m", "what is 1 plus 1")
    with open_runtime(load_settings()) as runtime, pytest.raises(TurnInterrupted):
        session = runtime.session("stop")
        session.run_turn("what is 6 times 7", StopAtTheFirstTool(session.stop))

    turns = json.loads(run_cli("history", "-t", "stop", "--json").stdout)
    tree = run_cli("history", "-t", "stop", "--tree").stdout.decode()
    assert turns[0]["status"] == "cancelled"
    assert "cancelled" in tree and "interrupted" not in tree


def test_markdown_export_keeps_single_line_breaks():
    run_cli("chat", "-t", "md", "-m", "weather in Paris and Rome")

    text = run_cli("export", "-t", "md", "--format", "md").stdout.decode()

    from markdown_it import MarkdownIt

    html = MarkdownIt().render(text)
    assert re.search(r"Paris on [^<]*<br />\s*Rome on", html)


def test_an_endpoints_error_is_shown_whole_in_the_failure_panel(
    openai_server: OpenAIServer, monkeypatch
):
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    masked = "sk-proj-" + "*" * 300 + "5NQA"  # cut the advice after it at 300 characters
    openai_server.add(
        error(
            401,
            f"Incorrect API key provided: {masked}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            type="invalid_request_error",
            code="invalid_api_key",
        )
    )

    result = run_cli("chat", "-t", "k", "-m", "hello", "--model", "openai:m", columns=80)

    panel = " ".join(line.strip("│ ") for line in result.stderr.decode().splitlines())
    assert "You can find your API key at https://platform.openai.com/account/api-keys." in panel
    assert "sk-proj-**** 5NQA" in panel or "sk-proj-****5NQA" in panel


def test_hints_are_commands_that_can_be_pasted():
    run_cli("chat", "-t", "h", "-m", "what is 1 plus 1")
    run_cli("chat", "-t", "h", "-m", "what is 2 plus 2")
    rollback = run_cli("rollback", "-t", "h", "--turns", "1", "--db", "db/agent.sqlite")
    fork = run_cli("fork", "-t", "h", "--to", "h2")
    missing = run_cli("history", "-t", "nope")

    undo = rollback.stderr.decode().split("undo this with: ")[1].strip()
    assert re.fullmatch(
        r"waypoint rollback --thread h --checkpoint [0-9a-f]{12} --db db/agent.sqlite", undo
    )
    assert "continue with: waypoint chat --thread h2" in fork.stderr.decode()
    assert "list them with: waypoint threads list" in missing.stderr.decode()
