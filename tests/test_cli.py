"""The CLI as a user runs it: one-shot transcripts, --jsonl, --stream updates, listings and bad input."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli_boundary import invoke
from tests.conftest import REPO, run_cli, run_cli_process
from tests.fakes import TOOL_NAMES


def test_one_shot_answers_on_stdout_and_shows_tool_cards_on_stderr():
    result = run_cli("chat", "--thread", "t1", "-m", "what is 6 times 7")
    assert result.returncode == 0
    assert result.stdout.decode() == "6 * 7 = 42\n"
    stderr = result.stderr.decode()
    assert "calculator" in stderr and "expression: 6 * 7" in stderr and "42" in stderr


def test_without_thread_a_new_id_is_printed(isolated):
    result = run_cli("chat", "-m", "what is 1 plus 1")
    assert result.returncode == 0
    assert "thread " in result.stderr.decode()
    listing = json.loads(run_cli("threads", "list", "--json").stdout)
    assert len(listing) == 1 and result.stderr.decode().split("thread ")[1].startswith(
        listing[0]["thread_id"]
    )


def test_piped_stdin_is_the_message_and_bad_utf8_is_replaced():
    result = run_cli("chat", "-t", "pipe", input=b"what is 2 plus 3 \xff\n")
    assert result.returncode == 0, result.stderr.decode()
    assert "2 + 3 = 5" in result.stdout.decode()
    history = json.loads(run_cli("history", "-t", "pipe", "--json").stdout)
    assert "\ufffd" in history[0]["preview"]


@pytest.mark.dated
def test_jsonl_prints_one_event_per_line_in_order():
    result = run_cli(
        "chat", "-t", "j", "--jsonl", "-m", "weather in Paris and Tokyo, which is warmer?"
    )
    assert result.returncode == 0
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "final"
    assert events[-1]["status"] == "answered" and events[-1]["turn"] == 1
    assert "Difference:" in events[-1]["answer"]
    tool_calls = [e["name"] for e in events if e["event"] == "tool_call"]
    assert sorted(tool_calls[:2]) == ["get_weather", "get_weather"]
    assert tool_calls[2] == "calculator"
    assert {"node", "token", "tool_result"} <= set(kinds)
    nodes = [e["node"] for e in events if e["event"] == "node"]
    assert nodes == ["agent", "tools", "agent", "tools", "agent"]
    tokens = "".join(e["text"] for e in events if e["event"] == "token")
    assert tokens == events[-1]["answer"]
    assert result.stderr.decode() == ""


def test_stream_updates_prints_every_node_output():
    result = run_cli("chat", "-t", "u", "--stream", "updates", "-m", "what is 6 times 7")
    assert result.returncode == 0
    stderr = result.stderr.decode()
    for node in ("── agent", "── tools"):
        assert node in stderr
    assert stderr.index("── agent") < stderr.index("── tools") < stderr.rindex("── agent")
    assert '"iteration": 1' in stderr and '"call_signatures"' in stderr
    assert result.stdout.decode() == "6 * 7 = 42\n"


def test_threads_list_and_history_show_turns():
    run_cli("chat", "-t", "alpha", "-m", "what is 1 plus 1")
    run_cli("chat", "-t", "alpha", "-m", "my name is Ada")
    run_cli("chat", "-t", "beta", "-m", "what time is it")
    listing = json.loads(run_cli("threads", "list", "--json").stdout)
    assert [t["thread_id"] for t in listing] == ["beta", "alpha"]
    alpha = listing[1]
    assert alpha["title"] == "what is 1 plus 1" and alpha["turns"] == 2
    history = json.loads(run_cli("history", "-t", "alpha", "--json").stdout)
    assert [h["turn"] for h in history] == [2, 1]
    assert history[1]["tools"] == ["calculator"] and history[1]["status"] == "answered"
    table = run_cli("history", "-t", "alpha").stdout.decode()
    assert "my name is Ada" in table and "calculator" in table


def test_bad_input_gets_a_clear_error_and_writes_nothing(isolated):
    cases = [
        (["chat", "-t", "bad id!", "-m", "hi"], 2, "invalid thread id"),
        (["chat", "-t", "x" * 65, "-m", "hi"], 2, "invalid thread id"),
        (["chat", "-t", "ok", "-m", "   "], 2, "the message is empty"),
        (["chat", "-t", "ok", "-m", "a" * 100_001], 2, "the limit is 100,000"),
        (["history", "-t", "missing"], 2, "thread missing does not exist"),
        (["chat", "-t", "ok", "--model", "nonsense", "-m", "hi"], 3, "unknown model 'nonsense'"),
    ]
    for args, code, message in cases:
        result = run_cli(*args)
        assert result.returncode == code, (args, result.stderr.decode())
        assert message in result.stderr.decode(), args
        assert "Traceback" not in result.stderr.decode()
    assert json.loads(run_cli("threads", "list", "--json").stdout) == []


def test_a_workspace_that_is_a_file_is_a_config_error_naming_it(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
):
    notes = isolated / "notes.txt"
    notes.write_text("mine")
    cases = [
        (["--workspace", str(notes)], f"the workspace {notes} is a file, not a directory"),
        (["--workspace", str(notes / "sub")], f"{notes} is a file, not a directory"),
    ]
    for flags, message in cases:
        outcome = invoke("chat", "-t", "w", *flags, "-m", "what is 1 plus 1")
        assert outcome.internal_error is None, outcome.internal_error
        assert (outcome.code, message in outcome.stderr) == (3, True), outcome.stderr
    monkeypatch.setenv("APP_WORKSPACE", str(notes))
    outcome = invoke("chat", "-t", "w", "-m", "what is 1 plus 1")
    assert outcome.internal_error is None, outcome.internal_error
    assert outcome.code == 3 and "APP_WORKSPACE" in outcome.stderr
    assert notes.read_text() == "mine"


def test_a_binary_env_file_is_a_config_error_naming_it(isolated: Path):
    (isolated / ".env").write_bytes(b"\xff\xfeA\x00P\x00P\x00_\x00")
    for args in (["threads", "list"], ["chat", "-t", "e", "-m", "what is 1 plus 1"]):
        outcome = invoke(*args)
        assert outcome.internal_error is None, outcome.internal_error
        assert outcome.code == 3
        assert f"the settings file {isolated / '.env'} is not UTF-8 text" in outcome.stderr


def test_unwritable_database_location_is_a_clear_error(isolated: Path):
    blocker = isolated / "file"
    blocker.write_text("x")
    result = run_cli("chat", "-t", "t", "-m", "hi", "--db", str(blocker / "sub" / "db.sqlite"))
    assert result.returncode == 3
    assert "cannot create the database" in result.stderr.decode()


def test_ctrl_c_in_one_shot_exits_130_and_the_thread_stays_usable(isolated: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    marker = isolated / "started"
    process = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "scripts" / "slow_turn.py"),
            "cc",
            str(marker),
            str(isolated / "never"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        # A shell's background job starts with SIGINT ignored; a terminal user's process does not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr.decode()
    assert "was interrupted" in stderr.decode() and "Traceback" not in stderr.decode()
    after = run_cli("chat", "-t", "cc", "-m", "what is 2 plus 2")
    assert after.returncode == 0, after.stderr.decode()
    assert "2 + 2 = 4" in after.stdout.decode()
    assert "interrupted" not in after.stderr.decode()  # the interrupted turn was already closed


PAUSE_AT_IMPORT = "tests.scripts.pause_at_import"


def interrupted_at_pause(script: str, where: str, *args: str) -> tuple[bytes, subprocess.Popen]:
    """Run `python -m SCRIPT WHERE NOTIFY_FD ARGS…` (SIGINT as a terminal gives it), wait until it
    writes that it paused, and press Ctrl-C there. Returns what it wrote (b"" if it died first) and
    the process, its stdin still open."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    notify_read, notify_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", script, where, str(notify_write), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        pass_fds=[notify_write],
        # A shell's background job starts with SIGINT ignored; a terminal user's process does not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(notify_write)
    with os.fdopen(notify_read, "rb") as notified:
        paused = notified.read()  # EOF once the child wrote and closed its end, or died
    if paused == b"paused\n":
        process.send_signal(signal.SIGINT)
    return paused, process


def test_ctrl_c_at_any_point_of_start_up_exits_130_with_one_line():
    """Importing the CLI takes most of a second: a Ctrl-C while the entry point imports typer or the
    CLI, or while a command imports what it needs, is the same clean exit as one during a turn."""
    for module in (
        "typer",
        "rich.console",
        "app.cli.time_travel",
        "app.config",
        "app.service.threads",
    ):
        paused, process = interrupted_at_pause(PAUSE_AT_IMPORT, module, "threads", "list")
        process.wait(timeout=60)  # stdin stays open until then: the pause ends by the signal only
        stdout, stderr = process.communicate()
        assert paused == b"paused\n", (module, stderr.decode())
        assert (process.returncode, stdout, stderr) == (130, b"", b"interrupted\n"), module


def test_the_real_binary_exits_and_prints_as_the_in_process_runner_does(isolated: Path):
    """Every other CLI test runs the entry point in the test process (`run_cli`); this runs it as
    `python -m app` with stdin a pipe: the same exit statuses, and the same bytes out."""
    (isolated / "a-directory").mkdir()
    cases = [
        (["chat", "-t", "p"], b"what is 2 plus 3\n", 0),  # piped stdin is the message
        (["chat", "-t", "p"], b"", 2),  # ... and must not be empty
        (["history", "-t", "missing"], None, 2),  # an AppError
        (["chat", "-t", "p", "--model", "nonsense", "-m", "hi"], None, 3),
        (["chat", "--bogus"], None, 2),  # click's usage error
        (["doctor", "--db", str(isolated / "a-directory")], None, 1),  # typer.Exit(1)
    ]
    for args, stdin, code in cases:
        real = run_cli_process(*args, input=stdin)
        here = run_cli(*args, input=stdin)
        assert real.returncode == here.returncode == code, (args, real.stderr.decode())
        assert real.stdout == here.stdout, args
        if code == 0:  # the answer's tool card on stderr shows how long the tool took
            assert real.stdout == b"2 + 3 = 5\n", real.stderr.decode()
        else:
            assert real.stderr == here.stderr, args


def test_each_run_renders_for_its_own_terminal(monkeypatch):
    """rich reads COLUMNS (and NO_COLOR, and whether it writes to a terminal) when a Console is made:
    the CLI's consoles belong to one run, not to the first run in the process."""
    wide = run_cli("tools").stdout.decode().splitlines()
    narrow = run_cli("tools", columns=60).stdout.decode().splitlines()
    assert max(map(len, wide)) > 60
    assert max(map(len, narrow)) <= 60 and len(narrow) > len(wide)


def test_help_lists_every_command():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("chat", "threads", "history"):
        assert command in result.stdout.decode()


def test_tools_lists_every_tool_with_its_schema():
    result = run_cli("tools", "--json")
    assert result.returncode == 0, result.stderr.decode()
    tools = {t["name"]: t for t in json.loads(result.stdout)}
    assert set(tools) >= {
        *TOOL_NAMES,
        "web_search",
        "remember",
        "recall",
    }
    assert tools["calculator"]["parameters"]["properties"]["expression"]["type"] == "string"
    # as the README's table says: run_python always asks, write_file when it would overwrite
    assert tools["run_python"]["needs_approval"] == "always"
    assert tools["edit_file"]["needs_approval"] == "always"
    assert tools["write_file"]["needs_approval"] == "when it overwrites a file"
    assert tools["calculator"]["needs_approval"] == "no"
    assert {t["source"] for t in tools.values()} == {"built-in"}


LOADED_AFTER = """
import sys
from app.__main__ import run
assert run(sys.argv[1:]) == 0
# LangGraph's allowlist of the types a checkpoint may hold is a module of constants (app/db/raw.py)
ALLOWED = {"langgraph", "langgraph.checkpoint", "langgraph.checkpoint.serde",
           "langgraph.checkpoint.serde._msgpack"}
heavy = [m for m in sys.modules if m.startswith(("langchain", "langgraph", "langsmith", "openai"))]
print(",".join(sorted(set(heavy) - ALLOWED) + [m for m in ("app.service.session",) if m in sys.modules]))
"""


def test_listing_threads_and_history_load_no_langgraph_or_langchain():
    """`threads list` and `history` read rows and decode blobs as data: importing LangGraph's
    machinery or LangChain would triple their start-up from the shell."""
    assert run_cli("chat", "-t", "listed", "-m", "what is 6 times 7").returncode == 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for command in (["threads", "list"], ["--help"], ["history", "-t", "listed"]):
        result = subprocess.run(
            [sys.executable, "-c", LOADED_AFTER, *command], capture_output=True, env=env
        )
        assert result.returncode == 0, result.stderr.decode()
        assert result.stdout.decode().splitlines()[-1] == "", (command, result.stdout.decode())


ONE_SHOT_LOADS = """
import sys
from app.__main__ import run
assert run(sys.argv[1:]) == 0
print(",".join(m for m in ("numpy", "langchain_openai", "mcp", "prompt_toolkit") if m in sys.modules))
"""


def test_a_one_shot_turn_loads_only_what_the_turn_needs():
    """No numpy (which LangGraph's SqliteStore would load through sqlite_vec, for vector search the
    memory does not use), no OpenAI client for the offline model, no MCP, no REPL."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = ["chat", "--model", "offline", "-t", "one", "-m", "what is 6 times 7"]
    result = subprocess.run(
        [sys.executable, "-c", ONE_SHOT_LOADS, *command], capture_output=True, env=env
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines()[-1] == "", result.stdout.decode()


WITHOUT_MODULE = """
import sys
sys.modules[sys.argv[1]] = None  # as if the extra that provides it were not installed
sys.argv = ["app", *sys.argv[2:]]
from app.__main__ import main
main()
"""


def test_a_missing_extra_is_named_with_its_install_command():
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    cases = [
        ("uvicorn", ["serve", "--port", "0"], "serve"),
        ("psycopg", ["threads", "list", "--db", "postgresql://u@127.0.0.1:1/x"], "postgres"),
    ]
    for module, args, extra in cases:
        result = subprocess.run(
            [sys.executable, "-c", WITHOUT_MODULE, module, *args],
            capture_output=True,
            env=env,
            timeout=60,
        )
        stderr = result.stderr.decode()
        assert result.returncode == 3, stderr
        assert f"pip install -e '.[{extra}]'" in stderr  # brackets printed, not read as markup
        assert "Traceback" not in stderr


def test_jsonl_error_events_carry_a_traceback_only_with_debug(monkeypatch: pytest.MonkeyPatch):
    def broken(expression: str) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr("tools.calculator.tool.evaluate", broken)
    plain = invoke("chat", "-t", "j", "--jsonl", "-m", "what is 6 times 7")
    debug = invoke("--debug", "chat", "-t", "k", "--jsonl", "-m", "what is 6 times 7")
    for outcome, with_traceback in ((plain, False), (debug, True)):
        assert outcome.internal_error is None, outcome.internal_error
        assert outcome.code == 1  # the turn failed in failure_handler; the thread goes on
        events = [json.loads(line) for line in outcome.stdout.splitlines()]
        [error] = [e for e in events if e["event"] == "error"]
        assert ("traceback" in error) is with_traceback
        assert ("Traceback (most recent call last)" in outcome.stdout) is with_traceback
        assert (error["node"], error["error"]) == ("tools", "RuntimeError: boom")


def test_an_empty_thread_id_is_invalid_not_a_new_thread():
    outcome = invoke("chat", "--thread", "", "-m", "what is 1 plus 1")
    assert outcome.internal_error is None, outcome.internal_error
    assert outcome.code == 2
    assert "invalid thread id ''" in outcome.stderr
    assert json.loads(invoke("threads", "list", "--json").stdout) == []


NASTY = "bad\nname\x1b[2J\u202e.txt"  # a newline, an escape sequence, a right-to-left override
NASTY_SHOWN = "bad\\nname\\x1b[2J\\u202e.txt"


def test_file_names_with_control_characters_are_escaped_in_cards_and_errors(isolated: Path):
    """Tool cards (the call, the result, an error) show such a name on one line, with no raw
    escape codes; the file itself keeps its real name."""
    from app.cli.render import ConsoleRenderer
    from app.config import load_settings
    from app.service.context import make_context
    from app.service.session import ChatSession
    from app.store import open_checkpointer
    from tests.fakes import ScriptedChatModel, ai_calls, call

    model = ScriptedChatModel(
        script=[
            ai_calls(call("write_file", {"path": NASTY, "content": "x"}, "c1")),
            ai_calls(call("read_file", {"path": f"missing{NASTY}"}, "c2")),
            "done",
        ]
    )
    settings = load_settings(approve="auto")
    out, err = io.StringIO(), io.StringIO()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, "n", make_context(settings, model, "auto"))
        session.run_turn("go", ConsoleRenderer(Console(file=out), Console(file=err, width=200)))
    shown = err.getvalue()
    assert "\x1b" not in shown and "\u202e" not in shown
    assert f"wrote 1 bytes to {NASTY_SHOWN} (created)" in shown
    assert f"file 'missing{NASTY_SHOWN}' does not exist" in shown
    assert not any(line.lstrip("│ ").startswith("name") for line in shown.splitlines())
    assert (isolated / "workspace" / NASTY).read_text() == "x"


def test_a_path_with_control_characters_is_escaped_in_errors_and_notices(isolated: Path):
    from app.service.workspace_sync import WorkspaceReport

    nasty = isolated / NASTY
    nasty.write_text("a file, not a directory")
    outcome = invoke("chat", "-t", "e", "--workspace", str(nasty), "-m", "what is 1 plus 1")
    assert outcome.code == 3
    line = " ".join(outcome.stderr.split())  # one message, wrapped between words at the width
    assert outcome.stderr.startswith("error:") and outcome.stderr.count("error:") == 1
    assert f"the workspace {isolated / NASTY_SHOWN} is a file" in line
    assert "\x1b" not in outcome.stderr

    report = WorkspaceReport(written=[NASTY], removed=[NASTY], conflicts=[NASTY])
    assert [line.split(" ")[:2] for line in report.lines()] == [
        ["restored", NASTY_SHOWN],
        ["removed", NASTY_SHOWN],
        ["left", NASTY_SHOWN],
    ]


def test_overlong_database_and_workspace_names_are_config_errors(isolated: Path):
    long_name = "n" * 300
    cases = [
        (
            ["threads", "list", "--db", str(isolated / f"{long_name}.sqlite")],
            "cannot use the database",
        ),
        (
            ["chat", "-t", "w", "--workspace", str(isolated / long_name), "-m", "what is 1 plus 1"],
            "cannot be used: File name too long",
        ),
    ]
    for args, message in cases:
        outcome = invoke(*args)
        assert outcome.internal_error is None, outcome.internal_error
        assert (outcome.code, message in outcome.stderr) == (3, True), outcome.stderr


@pytest.mark.parametrize(
    ("point", "status"),
    [
        ("closing", 130),  # saved, but the answer is not all written yet: interrupted
        ("cleanup", 0),  # written and saved before the signal: the turn is done
    ],
)
def test_ctrl_c_exits_0_only_when_the_answer_was_written_and_saved_before_it(
    isolated: Path, point: str, status: int
):
    """Issue 32's rule for a one-shot turn, at two points held exactly (no sleeps)."""
    turn = ["chat", "-t", "held", "-m", "what is 6 times 7"]
    paused, process = interrupted_at_pause("tests.scripts.hold_turn", point, *turn)
    stdout, stderr = process.communicate(timeout=60)  # closes stdin: a held read goes on
    assert paused == b"paused\n", stderr.decode()
    assert process.returncode == status, stderr.decode()
    assert "Traceback" not in stderr.decode()
    if status == 0:
        assert "42" in stdout.decode()
    else:
        assert "interrupted" in stderr.decode()
    saved = run_cli("history", "-t", "held").stdout.decode()
    assert "what is 6 times 7" in saved  # the thread holds the turn either way
