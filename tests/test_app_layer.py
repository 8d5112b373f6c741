"""One application layer (app/service/runtime.py): a replay has the tools of the turn it replays, the server
reads a thread through its own strategy, rollback locks before it reads, a replay never overwrites a
file it left alone, and "has side effects" is one property of a tool."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from langchain_core.tools import StructuredTool
from rich.console import Console

from app.cli.render import JsonlRenderer
from app.cli.repl import Repl
from app.config import load_settings
from app.db import lock_thread, open_database
from app.errors import ThreadBusyError
from app.server.api import create_app
from app.service import api
from app.service.runtime import open_runtime
from tests.conftest import run_cli
from tools import default_tools, has_side_effects, side_effect_names


def seed(thread: str, *messages: str, strategy: str | None = None) -> None:
    with open_runtime(load_settings()) as runtime:
        session = runtime.session(thread, strategy)
        for text in messages:
            session.run_turn(text, JsonlRenderer(Console(file=io.StringIO())))


def checkpoints(thread: str) -> list[dict]:
    result = run_cli("history", "-t", thread, "--all", "--json")
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def first_step(thread: str) -> str:
    """The checkpoint right after the user's message, before the model's first step."""
    return next(r for r in checkpoints(thread) if r["source"] == "loop" and r["step"] == 0)[
        "checkpoint_id"
    ]


def head_messages(thread: str) -> list[dict]:
    return json.loads(run_cli("show", "-t", thread, "--json").stdout)["messages"]


def test_a_replayed_turn_has_the_memory_tools_of_the_turn_it_replays():
    seed("m", "remember that my favourite colour is green")
    assert any(m.get("name") == "remember" for m in head_messages("m"))

    replayed = run_cli("replay", "-t", "m", "-c", first_step("m"), "--yes")

    assert replayed.returncode == 0, replayed.stderr.decode()
    results = [m for m in head_messages("m") if m["type"] == "tool" and m["name"] == "remember"]
    assert results and all(m["status"] != "error" for m in results), results
    assert "no tool named" not in replayed.stdout.decode() + replayed.stderr.decode()


def test_a_replay_never_overwrites_a_file_changed_outside_waypoint(isolated: Path):
    seed("rb", "write 'v1' to rb.txt")
    edited = isolated / "workspace" / "rb.txt"
    edited.write_text("edited by hand")

    replayed = run_cli("replay", "-t", "rb", "-c", first_step("rb"), "--yes")

    assert "left rb.txt alone: it was changed outside Waypoint" in replayed.stderr.decode()
    assert edited.read_text() == "edited by hand"
    [result] = [m for m in head_messages("rb") if m["type"] == "tool"][-1:]
    assert result["status"] == "error" and "changed outside Waypoint" in result["content"]

    forced = run_cli("replay", "-t", "rb", "-c", first_step("rb"), "--yes", "--force")
    assert forced.returncode == 0, forced.stderr.decode()
    assert edited.read_text() == "v1"


def test_rollback_takes_the_thread_lock_before_it_reads_the_thread():
    settings = load_settings()
    with lock_thread(settings.db, "not-yet"):
        result = run_cli("rollback", "-t", "not-yet", "--turns", "1")
    assert result.returncode == 2
    assert "thread not-yet is busy" in result.stderr.decode()


def test_the_server_reads_and_rolls_back_a_plan_thread_through_the_plan_graph():
    seed("p", "weather in Paris and Rome, which is warmer?", strategy="plan")
    mid_plan = [c for c in checkpoints("p") if c["node"] == "executor"][-1]["checkpoint_id"]
    client = TestClient(create_app(load_settings()), base_url="http://localhost")

    rolled = client.post("/threads/p/rollback", json={"checkpoint_id": mid_plan})

    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["pending"] == ["executor"]
    assert client.get("/threads/p/state").json()["next"] == ["executor"]


def test_side_effects_are_one_property_of_a_tool(tmp_path: Path):
    builtin = side_effect_names(default_tools(tmp_path))
    assert builtin == {"write_file", "edit_file", "run_python"}

    def echo(text: str) -> str:
        """Echo."""
        return text

    def mcp_tool(read_only: bool) -> StructuredTool:
        metadata = {"mcp_server": "s", "mcp_tool": "echo", "trusted": True, "read_only": read_only}
        return StructuredTool.from_function(echo, name="s__echo", metadata=metadata)

    assert has_side_effects(mcp_tool(read_only=False))  # a replay asks before running it again
    assert not has_side_effects(mcp_tool(read_only=True))


def test_a_replay_through_the_server_never_overwrites_a_file_changed_outside_waypoint(
    isolated: Path,
):
    seed("srv", "write 'v1' to rb.txt")
    edited = isolated / "workspace" / "rb.txt"
    edited.write_text("edited by hand")
    # a server that runs risky calls without asking: only the spared file stops the write
    client = TestClient(create_app(load_settings(approve="auto")), base_url="http://localhost")

    replayed = client.post(
        "/threads/srv/replay", json={"checkpoint_id": first_step("srv"), "confirm": True}
    )

    assert replayed.status_code == 200, replayed.text
    assert "left rb.txt alone" in replayed.text
    assert edited.read_text() == "edited by hand"
    [result] = [m for m in head_messages("srv") if m["type"] == "tool"][-1:]
    assert result["status"] == "error" and "changed outside Waypoint" in result["content"]


WRITES = {
    "rollback": lambda db: api.rollback(db, "held", turns=1),
    "fork": lambda db: api.fork(db, "src", "held"),
    "import": lambda db: api.import_thread(db, {"checkpoints": []}, "held"),
    "delete": lambda db: api.delete_thread(db, "held"),
    "create": lambda db: api.create_thread(db, "held"),
    "replay start": lambda db: api.prepare_replay(db, "held", "x"),
}


@pytest.mark.parametrize("service", sorted(WRITES))
def test_every_writing_service_takes_the_thread_lock_before_it_reads(service: str):
    """The thread does not even exist: a service that read first would say "not found"; one that
    locks first reports the other writer."""
    settings = load_settings()
    seed("src", "hello")
    with (
        open_database(settings.database) as database,
        lock_thread(settings.db, "held"),
        pytest.raises(ThreadBusyError, match="thread held is busy"),
    ):
        WRITES[service](database)


def test_the_cli_the_repl_and_the_server_roll_back_through_the_same_service(monkeypatch):
    seed("same", "hello", "what is 6 times 7")
    calls: list[tuple] = []
    real = api.rollback

    def spy(database, thread_id, **options):  # type: ignore[no-untyped-def]
        calls.append((thread_id, options["turns"], options["checkpoint"]))
        return real(database, thread_id, **options)

    monkeypatch.setattr(api, "rollback", spy)
    assert run_cli("rollback", "-t", "same", "--turns", "1").returncode == 0
    client = TestClient(create_app(load_settings()), base_url="http://localhost")
    assert client.post("/threads/same/rollback", json={"turns": 1}).status_code == 400
    with open_runtime(load_settings()) as runtime:
        repl = Repl(runtime, runtime.session("same"), *consoles(), show_updates=False, debug=False)
        repl.handle("/undo", "/undo")

    assert calls == [("same", 1, None), ("same", 1, None), ("same", 1, None)]


def consoles() -> tuple[Console, Console]:
    return Console(file=io.StringIO()), Console(file=io.StringIO())


def test_a_settled_process_keeps_its_set_up_out_of_the_collectors_scans():
    """settle_heap (the REPL, serve and the benchmark's workers, once set up): in a process of its
    own, since it changes the collector for the rest of the process."""
    import subprocess
    import sys

    from tests.conftest import REPO

    script = (
        "import gc\n"
        "from app.service.runtime import YOUNG_COLLECTION_EVERY, open_runtime, settle_heap\n"
        "from app.config import load_settings\n"
        "assert gc.get_freeze_count() == 0\n"
        "with open_runtime(load_settings()) as runtime:\n"
        "    settle_heap()\n"
        "    assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()\n"
        "    assert gc.get_threshold()[0] == YOUNG_COLLECTION_EVERY\n"
        "print('settled')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "settled"
