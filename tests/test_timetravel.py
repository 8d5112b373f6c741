"""Time travel from the command line: history views, show, rollback, replay, fork, diff, and the
workspace files that follow the conversation. Tests taking `database` run on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from app.cli.render import JsonlRenderer
from app.config import load_settings
from app.db import open_database
from app.service.context import make_context
from app.service.index import CheckpointIndex
from app.service.session import ChatSession
from app.store import open_checkpointer
from tests.conftest import run_cli
from tests.db_helpers import checkpoint_count
from tests.test_refusals import snapshot


def seed(thread: str, *messages: str) -> None:
    """Run real offline turns in-process (fast), as `chat -m` would."""
    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, thread, make_context(settings))
        for text in messages:
            session.run_turn(text, JsonlRenderer(Console(file=io.StringIO())))


def index(thread: str) -> CheckpointIndex:
    settings = load_settings()
    with open_database(settings.db) as database:
        return CheckpointIndex(database, thread)


def turn_list(thread: str) -> list[dict]:
    result = run_cli("history", "-t", thread, "--json")
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def head_messages(thread: str) -> list[dict]:
    result = run_cli("show", "-t", thread, "--json")
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)["messages"]


def test_rollback_then_a_new_turn_keeps_both_branches(database: str):
    seed("r", "what is 1 plus 1", "what is 2 plus 2", "what is 3 plus 3")
    result = run_cli("rollback", "-t", "r", "--turns", "2")
    assert result.returncode == 0, result.stderr.decode()
    stderr = result.stderr.decode()
    assert "is back at turn 1" in stderr
    assert "undone: turn 2 · what is 2 plus 2" in stderr and "undone: turn 3" in stderr
    assert [m["content"] for m in head_messages("r")][-1] == "1 + 1 = 2"

    assert run_cli("chat", "-t", "r", "-m", "what is 5 plus 5").returncode == 0
    contents = [m["content"] for m in head_messages("r")]
    assert [c for c in contents if c.startswith("what is")] == [
        "what is 1 plus 1",
        "what is 5 plus 5",
    ]
    assert contents[-1] == "5 + 5 = 10"
    tree = run_cli("history", "-t", "r", "--tree").stdout.decode()
    assert "what is 3 plus 3" in tree and "branch" in tree and "← head" in tree
    every = json.loads(run_cli("history", "-t", "r", "--all", "--json").stdout)
    abandoned = [row for row in every if not row["on_branch"]]
    assert {row["preview"] for row in abandoned} >= {"what is 2 plus 2", "what is 3 plus 3"}


def test_a_rollback_can_itself_be_rolled_back(database: str):
    seed("rr", "what is 1 plus 1", "what is 2 plus 2")
    first = run_cli("rollback", "-t", "rr", "-n", "1")
    undo_hint = first.stderr.decode().split("undo this with: ")[1].split()
    assert undo_hint[:5] == ["waypoint", "rollback", "--thread", "rr", "--checkpoint"]
    again = run_cli(*undo_hint[1:])
    assert again.returncode == 0, again.stderr.decode()
    assert [m["content"] for m in head_messages("rr")][-1] == "2 + 2 = 4"


def test_rollback_to_the_very_first_checkpoint_works_and_the_thread_goes_on(database: str):
    """The thread's first checkpoint has no parent; copying it needs the full config (a crash once)."""
    seed("first", "what is 1 plus 1", "what is 2 plus 2")
    first = _oldest_checkpoint("first")
    result = run_cli("rollback", "-t", "first", "--checkpoint", first)
    assert result.returncode == 0, result.stderr.decode()
    assert head_messages("first") == []
    assert run_cli("chat", "-t", "first", "-m", "what is 5 plus 5").returncode == 0
    contents = [m["content"] for m in head_messages("first")]
    assert contents[0] == "what is 5 plus 5" and contents[-1] == "5 + 5 = 10"


def _oldest_checkpoint(thread: str) -> str:
    rows = json.loads(run_cli("history", "-t", thread, "--all", "--json").stdout)
    return rows[-1]["checkpoint_id"]  # newest first


def test_rollback_restores_workspace_files_and_does_not_clobber_edited_ones(
    isolated: Path, database: str
):
    seed("w", "write 'v1' to a.txt", "write 'v2' to a.txt", "save 'hello' to b.txt")
    workspace = isolated / "workspace"
    assert (workspace / "a.txt").read_text() == "v2"
    (workspace / "b.txt").write_text("edited by hand")

    result = run_cli("rollback", "-t", "w", "--turns", "2")
    assert result.returncode == 0
    assert (workspace / "a.txt").read_text() == "v1"
    assert (workspace / "b.txt").read_text() == "edited by hand"
    assert "left b.txt alone: it was changed outside Waypoint" in result.stderr.decode()

    forward = result.stderr.decode().split("undo this with: ")[1].split()
    assert forward[0] == "waypoint"
    assert run_cli(*forward[1:], "--force").returncode == 0
    assert (workspace / "a.txt").read_text() == "v2"
    assert (workspace / "b.txt").read_text() == "hello"

    back = run_cli("rollback", "-t", "w", "--turns", "1")
    assert "removed b.txt" in back.stderr.decode()
    assert not (workspace / "b.txt").exists()


def test_keep_files_leaves_the_workspace_alone(isolated: Path):
    seed("k", "write 'v1' to a.txt", "write 'v2' to a.txt")
    assert run_cli("rollback", "-t", "k", "-n", "1", "--keep-files").returncode == 0
    assert (isolated / "workspace" / "a.txt").read_text() == "v2"


def test_fork_equals_the_source_then_diverges_independently(database: str):
    seed("src", "my name is Ada", "what is 2 plus 2", "what is 3 plus 3")
    turn_two = next(t for t in turn_list("src") if t["turn"] == 2)["checkpoint_id"]
    result = run_cli("fork", "-t", "src", "-c", turn_two, "--to", "copy")
    assert result.returncode == 0, result.stderr.decode()
    source_at = json.loads(run_cli("show", "-t", "src", "-c", turn_two, "--json").stdout)
    fork_head = json.loads(run_cli("show", "-t", "copy", "--json").stdout)
    assert fork_head["messages"] == source_at["messages"]
    assert (fork_head["turn"], fork_head["status"]) == (source_at["turn"], source_at["status"])

    assert run_cli("chat", "-t", "copy", "-m", "what's my name?").returncode == 0
    assert head_messages("copy")[-1]["content"] == "Your name is Ada."
    assert head_messages("src")[-1]["content"] == "3 + 3 = 6"
    assert run_cli("fork", "-t", "src", "--to", "copy").returncode == 2


def test_replay_reruns_the_model_on_a_new_branch(database: str):
    seed("p", "what is 6 times 7")
    every = json.loads(run_cli("history", "-t", "p", "--all", "--json").stdout)
    after_input = next(row for row in every if row["source"] == "loop" and row["step"] == 0)
    result = run_cli("replay", "-t", "p", "-c", after_input["checkpoint_id"])
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "6 * 7 = 42\n"
    rows = index("p").rows
    assert len([r for r in rows if r.note == "replay"]) >= 3
    assert index("p").head.note == "replay"
    end = json.loads(run_cli("history", "-t", "p", "--all", "--json").stdout)
    # on a branch from step 0: the fork's copy, then agent, tools, agent again
    assert len(end) == len(every) + 4


def test_replay_asks_before_rerunning_a_file_write(isolated: Path):
    seed("s", "write 'v1' to a.txt")
    every = json.loads(run_cli("history", "-t", "s", "--all", "--json").stdout)
    start = next(row for row in every if row["source"] == "loop" and row["step"] == 0)[
        "checkpoint_id"
    ]
    refused = run_cli("replay", "-t", "s", "-c", start)
    assert refused.returncode == 2
    assert "would re-run tools with side effects (write_file" in refused.stderr.decode()
    assert "--yes" in refused.stderr.decode()
    allowed = run_cli("replay", "-t", "s", "-c", start, "--yes")
    assert allowed.returncode == 0, allowed.stderr.decode()
    assert (isolated / "workspace" / "a.txt").read_text() == "v1"


def test_replay_of_a_finished_checkpoint_says_there_is_nothing_to_run():
    seed("f", "what is 1 plus 1")
    head = turn_list("f")[0]["checkpoint_id"]
    result = run_cli("replay", "-t", "f", "-c", head)
    assert result.returncode == 2
    assert "ended its turn, so there is nothing to re-run" in result.stderr.decode()


def test_diff_lists_added_messages_and_counter_changes(database: str):
    seed("d", "what is 1 plus 1", "what is 2 plus 2")
    turns = turn_list("d")
    result = run_cli(
        "diff", "-t", "d", turns[1]["checkpoint_id"], turns[0]["checkpoint_id"], "--json"
    )
    assert result.returncode == 0, result.stderr.decode()
    changes = json.loads(result.stdout)
    assert [m["type"] for m in changes["added"]] == ["human", "ai", "tool", "ai"]
    assert changes["added"][0]["content"] == "what is 2 plus 2"
    assert changes["removed"] == []
    assert changes["counters"]["turn"] == {"from": 1, "to": 2}


def test_show_renders_the_conversation_like_the_chat():
    seed("v", "what is 6 times 7")
    result = run_cli("show", "-t", "v")
    text = result.stdout.decode()
    assert "you  what is 6 times 7" in text
    assert '→ calculator {"expression": "6 * 7"}' in text and "✓ calculator: 42" in text
    assert "agent 6 * 7 = 42" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["rollback", "-t", "x", "-c", "nope-not-an-id"],
            "checkpoint 'nope-not-an-id' does not exist in thread x",
        ),
        (["rollback", "-t", "x", "--turns", "5"], "thread x has 1 turn; there is no earlier turn"),
        (["rollback", "-t", "x"], "give exactly one of --turns N or --checkpoint ID"),
        (["rollback", "-t", "ghost", "-n", "1"], "thread ghost does not exist"),
        (["show", "-t", "x", "-c", "deadbeefcafe"], "does not exist in thread x"),
        (["diff", "-t", "x", "aaaaaaaa", "bbbbbbbb"], "does not exist in thread x"),
        (["replay", "-t", "x", "-c", "0123456789"], "does not exist in thread x"),
        (["fork", "-t", "x", "--to", "bad id"], "invalid thread id"),
        (["fork", "-t", "ghost", "--to", "new"], "thread ghost does not exist"),
    ],
)
def test_unknown_ids_give_clear_errors_and_write_nothing(db_path: Path, args, message):
    seed("x", "what is 1 plus 1")
    before = checkpoint_count(str(db_path))
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr.decode()
    assert message in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()
    assert checkpoint_count(str(db_path)) == before


def test_a_unique_part_of_a_checkpoint_id_is_enough(database: str):
    seed("u", "what is 1 plus 1", "what is 2 plus 2")
    full = turn_list("u")[1]["checkpoint_id"]
    result = run_cli("rollback", "-t", "u", "-c", full[-12:])
    assert result.returncode == 0, result.stderr.decode()
    assert f"a copy of {full[-12:]})" in result.stderr.decode()  # named as history shows it


def test_an_id_too_short_to_be_unique_says_so_not_that_it_does_not_exist():
    seed("s", "what is 1 plus 1")
    full = turn_list("s")[0]["checkpoint_id"]

    result = run_cli("show", "-t", "s", "-c", full[:4])

    assert result.returncode == 2
    assert (
        result.stderr.decode().split()
        == (
            f"error: checkpoint '{full[:4]}' is too short to name one checkpoint: give at least 6 "
            "characters of its id (the 12 that `history` shows)"
        ).split()
    )


def test_rollback_gives_back_a_file_the_agent_overwrote_instead_of_deleting_it(isolated: Path):
    workspace = isolated / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("my own notes")
    seed("o", "what is 1 plus 1", "write 'agent text' to notes.txt")
    assert (workspace / "notes.txt").read_text() == "agent text"
    result = run_cli("rollback", "-t", "o", "-n", "1")
    assert result.returncode == 0, result.stderr.decode()
    assert "restored notes.txt" in result.stderr.decode()
    assert (workspace / "notes.txt").read_text() == "my own notes"


def test_a_refused_replay_changes_no_file_and_no_checkpoint(isolated: Path, db_path: Path):
    for message in ("write 'v1' to a.txt", "write 'plan' to plan.txt"):  # as a user would
        assert run_cli("chat", "-t", "tt", "-m", message, "--approve", "auto").returncode == 0
    every = json.loads(run_cli("history", "-t", "tt", "--all", "--json").stdout)
    turn_one_input = next(
        row for row in every if row["turn"] == 1 and row["source"] == "loop" and row["step"] == 0
    )
    before = snapshot(db_path, isolated / "workspace")
    assert "plan.txt" in before[1]

    refused = run_cli("replay", "-t", "tt", "-c", turn_one_input["checkpoint_id"])

    assert refused.returncode == 2
    stderr = refused.stderr.decode()
    assert "would re-run tools with side effects (write_file)" in stderr
    assert "nothing was changed; pass --yes" in stderr and "workspace:" not in stderr
    assert snapshot(db_path, isolated / "workspace") == before


def test_checkpoints_are_named_by_any_unique_part_like_git():
    seed("ids", "what is 1 plus 1", "what is 2 plus 2")
    turns = turn_list("ids")
    newer, older = (row["checkpoint_id"] for row in turns)
    shown = run_cli("history", "-t", "ids").stdout.decode()
    newer_shown, older_shown = newer[-12:], older[-12:]
    assert newer_shown in shown and older_shown in shown

    for a, b in [(newer_shown[:6], older_shown[:6]), (newer[:13], older[:13])]:
        diffed = run_cli("diff", "-t", "ids", b, a, "--json")
        assert diffed.returncode == 0, diffed.stderr.decode()
        assert json.loads(diffed.stdout)["counters"]["turn"] == {"from": 1, "to": 2}
    shown_at = run_cli("show", "-t", "ids", "-c", older_shown[:8], "--json")
    assert json.loads(shown_at.stdout)["messages"][-1]["content"] == "1 + 1 = 2"

    ambiguous = run_cli("show", "-t", "ids", "-c", newer[:8])
    assert ambiguous.returncode == 2
    message = ambiguous.stderr.decode()
    assert "is ambiguous" in message and newer_shown in message and "(turn 2)" in message
