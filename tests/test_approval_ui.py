"""An approval shows code as code and each argument as a field; [e]dit changes one field (code in
$EDITOR), never JSON; the replay's question names what it re-runs in words, never a cut template."""

from __future__ import annotations

import io
import shlex
import sys

import pytest
from rich.console import Console

from app.cli.approval_ui import ask_approval, call_summary, edit_text

CODE = 'for i in range(3):\n    print("line", i)'


def _asked(calls: list[dict], answers: list[str], edit=None) -> tuple[str, dict]:  # type: ignore[no-untyped-def]
    screen = io.StringIO()
    console = Console(file=screen, width=80, color_system=None)
    replies = iter(answers)
    decisions = ask_approval(calls, lambda question, default: next(replies), console, edit)
    return screen.getvalue(), decisions


def _python_call(code: str = CODE) -> dict:
    return {"id": "c1", "name": "run_python", "args": {"code": code}, "reason": "runs Python code"}


def test_code_to_approve_is_shown_as_code_not_as_an_escaped_json_string():
    shown, _ = _asked([_python_call()], ["a"])
    assert "for i in range(3):" in shown
    assert '    print("line", i)' in shown
    assert "\\n" not in shown and '\\"' not in shown and "{" not in shown
    assert all(len(line) <= 80 for line in shown.splitlines())


def test_long_code_is_numbered_and_short_code_is_not():
    long_code = "\n".join(f"x{n} = {n}" for n in range(1, 9))
    numbered, _ = _asked([_python_call(long_code)], ["a"])
    assert any(line.strip(" │").startswith("8 x8 = 8") for line in numbered.splitlines())
    plain, _ = _asked([_python_call()], ["a"])
    assert not any(line.strip(" │").startswith("1 ") for line in plain.splitlines())


def test_editing_code_edits_the_code_itself_and_runs_the_edit():
    edited = []

    def edit(text: str, suffix: str) -> str:
        edited.append((text, suffix))
        return text.replace("range(3)", "range(5)")

    shown, decisions = _asked([_python_call()], ["e"], edit)
    assert edited == [(CODE, ".py")]  # the code as written, not JSON
    assert decisions == {"c1": {"action": "edit", "args": {"code": CODE.replace("3", "5")}}}
    assert "range(5)" in shown  # the call as it will run


def test_editing_a_short_field_asks_for_that_field_alone():
    call = {
        "id": "w1",
        "name": "write_file",
        "args": {"path": "a.txt", "content": "hello"},
        "reason": "overwrites the existing file 'a.txt'",
    }
    _, decisions = _asked([call], ["e", "path", "b.txt"], edit=lambda text, suffix: None)
    assert decisions == {"w1": {"action": "edit", "args": {"path": "b.txt", "content": "hello"}}}


def test_an_unchanged_edit_asks_again():
    shown, decisions = _asked([_python_call()], ["e", "r"], edit=lambda text, suffix: text)
    assert "code unchanged" in shown
    assert decisions["c1"]["action"] == "reject"


def test_edit_opens_the_editor_on_a_file_named_for_the_language(monkeypatch: pytest.MonkeyPatch):
    script = (
        "import sys, pathlib; p = pathlib.Path(sys.argv[1]); "
        "assert p.suffix == '.py'; p.write_text(p.read_text().replace('3', '5') + chr(10))"
    )
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
    assert edit_text(CODE, ".py") == CODE.replace("3", "5")  # the editor's final newline dropped


def test_a_replay_summary_says_a_plan_reference_in_words_and_cuts_between_words():
    call = {
        "name": "write_file",
        "args": {
            "path": "trip.txt",
            "content": "{{step 1.city}} on {{step 1.date}}: {{step 1.condition}}, low {{step 1.low}}",
        },
    }
    summary = call_summary(call)
    assert summary.startswith("write_file path: trip.txt · content: ‹step 1's city› on")
    assert "{" not in summary and summary.endswith("…")
    assert call_summary(_python_call()) == 'run_python code: for i in range(3): print("line", i)'
