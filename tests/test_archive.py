"""Thread export/import: lossless round trips (branches, DeltaChannel writes), refusals, no code on load."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver

from app.config import load_settings
from app.db import open_database
from app.errors import UsageError
from app.models.offline import OfflineChatModel
from app.service import archive
from app.service.archive import export_markdown, export_thread, import_thread, read_export_file
from app.store import open_checkpointer
from graphs.react.graph import build_graph
from graphs.shared.messages import new_message_id
from graphs.state import AgentContext, turn_input
from tools import default_tools

EXT_CONSTRUCTOR_POS_ARGS = 1  # langgraph's msgpack ext code for `module.name(*args)`


def run_turns(saver: SqliteSaver, db: Path, thread: str, texts: list[str]) -> None:
    graph = build_graph(saver)
    context = AgentContext(
        model=OfflineChatModel(), tools=default_tools(load_settings(db=db).workspace)
    )
    config = {"configurable": {"thread_id": thread}}
    for text in texts:
        turn = graph.get_state(config).values.get("turn", 0) + 1
        graph.invoke(
            turn_input(HumanMessage(text, id=new_message_id("human")), turn),
            {**config, "metadata": {"turn": turn, "preview": text[:40]}},
            context=context,
            durability="sync",
        )


@pytest.fixture
def source(db_path: Path) -> Path:
    """Thread `src`: a tool call, a failing tool call, a turn rolled back (old branch), a new turn."""
    with open_checkpointer(db_path) as saver:
        run_turns(
            saver,
            db_path,
            "src",
            ["what is 2 plus 3", "read missing.txt", "what is the weather in Paris"],
        )
        graph = build_graph(saver)
        snapshots = list(graph.get_state_history({"configurable": {"thread_id": "src"}}))
        end_of_turn_2 = next(s for s in snapshots if s.metadata.get("turn") == 2 and not s.next)
        graph.update_state(end_of_turn_2.config, None, as_node="__copy__")
        run_turns(saver, db_path, "src", ["what is 5 plus 5"])
    return db_path


def history(saver: SqliteSaver, thread: str) -> list[tuple]:
    graph = build_graph(saver)
    return [
        (
            s.config["configurable"]["checkpoint_id"],
            s.parent_config["configurable"]["checkpoint_id"] if s.parent_config else None,
            s.metadata,
            s.values,
            s.next,
            s.created_at,
            [(t.id, t.name, t.path, t.error, t.interrupts, t.result) for t in s.tasks],
        )
        for s in graph.get_state_history({"configurable": {"thread_id": thread}})
    ]


def stored_rows(db: Path, thread: str) -> tuple[list, list]:
    """The thread's raw rows, without the thread id: byte-identical if nothing was lost."""
    with sqlite3.connect(db) as connection:
        checkpoints = connection.execute(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
            "metadata FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread,),
        ).fetchall()
        writes = connection.execute(
            "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value "
            "FROM writes WHERE thread_id = ? ORDER BY checkpoint_id, task_id, idx",
            (thread,),
        ).fetchall()
    return checkpoints, writes


def thread_is_absent(db: Path, thread: str) -> bool:
    with sqlite3.connect(db) as connection:
        return (
            not connection.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = ?", (thread,)
            ).fetchone()
            and not connection.execute(
                "SELECT 1 FROM writes WHERE thread_id = ?", (thread,)
            ).fetchone()
        )


def exported(db: Path | str, thread: str = "src") -> dict:
    with open_database(db) as database:
        return export_thread(database, thread)


def import_into(db: Path | str, data: dict, thread: str) -> archive.ImportReport:
    with open_database(db) as database:
        return import_thread(database, data, thread)


# --- lossless round trips ----------------------------------------------------------------------


def test_round_trip_reproduces_every_checkpoint_of_every_branch(source: Path, tmp_path: Path):
    data = exported(source)
    other_db = tmp_path / "other" / "agent.sqlite"
    report = import_into(other_db, data, "copy")

    with open_checkpointer(source) as saver:
        original = history(saver, "src")
        head = build_graph(saver).get_state({"configurable": {"thread_id": "src"}}).values
    with open_checkpointer(other_db) as saver:
        imported = history(saver, "copy")
        imported_head = build_graph(saver).get_state({"configurable": {"thread_id": "copy"}})
    assert imported_head.values == head
    assert [m.content for m in head["messages"]][-1] == "5 + 5 = 10"
    assert len(imported) == len(original) == report.checkpoints
    for mine, theirs in zip(imported, original, strict=True):
        assert mine == theirs
    # the rolled-back turn came along on its abandoned branch
    assert any(
        m.content == "what is the weather in Paris" for row in imported for m in row[3]["messages"]
    )
    assert all(m.content != "what is the weather in Paris" for m in head["messages"])
    # the stored rows (blobs, metadata, task paths, write indexes) are byte-identical
    assert stored_rows(other_db, "copy") == stored_rows(source, "src")
    assert report.writes == len(stored_rows(source, "src")[1])


def test_export_is_plain_json_and_imports_after_a_text_round_trip(source: Path):
    text = json.dumps(exported(source), allow_nan=False)
    data = json.loads(text)
    assert data["format"] == "waypoint-thread/1"
    assert data["thread_id"] == "src"
    head = data["head"]
    assert [m["data"]["content"] for m in head["messages"] if m["type"] == "human"] == [
        "what is 2 plus 3",
        "read missing.txt",
        "what is 5 plus 5",
    ]
    assert (head["turn"], head["status"], head["iteration"]) == (3, "answered", 2)

    import_into(source, data, "copy")
    with open_checkpointer(source) as saver:
        assert history(saver, "copy") == history(saver, "src")


def test_delta_snapshot_blobs_survive_the_round_trip(db_path: Path, tmp_path: Path):
    with open_database(db_path) as database:
        saver = database.saver
        run_turns(saver, db_path, "long", [f"what is {n} plus 1" for n in range(27)])
        data = export_thread(database, "long")
        decoded = [
            saver.serde.loads_typed(
                (c["checkpoint"]["type"], base64.b64decode(c["checkpoint"]["data"]))
            )
            for c in data["checkpoints"]
        ]
    assert any(
        isinstance(value, _DeltaSnapshot) for c in decoded for value in c["channel_values"].values()
    ), "the thread is too short to contain a DeltaChannel snapshot"

    other_db = tmp_path / "other.sqlite"
    import_into(other_db, data, "long")
    with open_checkpointer(db_path) as saver:
        original = history(saver, "long")
    with open_checkpointer(other_db) as saver:
        assert history(saver, "long") == original
    assert stored_rows(other_db, "long") == stored_rows(db_path, "long")


# --- refusals --------------------------------------------------------------------------------


def test_importing_onto_an_existing_thread_is_refused(source: Path):
    data = exported(source)
    import_into(source, data, "copy")
    before = stored_rows(source, "copy"), stored_rows(source, "src")
    for target in ("copy", "src"):
        with pytest.raises(UsageError, match=f"thread {target} already exists; pass --as NEW"):
            import_into(source, data, target)
    assert (stored_rows(source, "copy"), stored_rows(source, "src")) == before


def test_an_invalid_target_thread_id_is_refused(source: Path):
    with pytest.raises(UsageError, match="invalid thread id"):
        import_into(source, exported(source), "../evil")


def test_export_of_an_unknown_thread_names_it(source: Path):
    with open_database(source) as database:
        with pytest.raises(UsageError, match="thread nope does not exist"):
            export_thread(database, "nope")
        with pytest.raises(UsageError, match="thread nope does not exist"):
            export_markdown(database, "nope")


def _truncate_base64(data: dict) -> None:
    blob = data["checkpoints"][-1]["checkpoint"]
    blob["data"] = blob["data"][:-5]


def _truncate_blob(data: dict) -> None:
    blob = data["checkpoints"][-1]["checkpoint"]
    raw = base64.b64decode(blob["data"])
    blob["data"] = base64.b64encode(raw[: len(raw) // 2]).decode()


def _orphan(data: dict) -> None:
    data["checkpoints"][-1]["parent_checkpoint_id"] = "1f000000-0000-6000-8000-000000000000"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.pop("format"), r"not a Waypoint thread export \(missing 'format'\)"),
        (lambda d: d.update(format="notes/1"), "not a Waypoint thread export"),
        (lambda d: d.update(format="waypoint-thread/2"), "unsupported export version"),
        (lambda d: d.pop("checkpoints"), "missing the field 'checkpoints'"),
        (lambda d: d.update(checkpoints=[]), "has no checkpoints"),
        (lambda d: d["checkpoints"][0].pop("metadata"), "missing the field 'metadata'"),
        (lambda d: d["checkpoints"][1].update(writes={}), "'writes' has the wrong type"),
        (_truncate_base64, "bad base64"),
        (_truncate_blob, "cannot be decoded"),
        (lambda d: d["checkpoints"][0]["checkpoint"].update(type="pickle"), "unsupported"),
        (_orphan, "is not in the export"),
    ],
)
def test_damaged_exports_are_refused_and_leave_nothing(
    source: Path, damage: Callable[[dict], object], message: str
):
    data = exported(source)
    damage(data)
    with pytest.raises(UsageError, match=message):
        import_into(source, data, "copy")
    assert thread_is_absent(source, "copy")


def _system_call(marker: Path) -> bytes:
    """msgpack for `os.system("touch MARKER")`, as a tampered checkpoint would carry it."""
    args = ormsgpack.packb(["os", "system", [f"touch {marker}"]])
    return ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, args))


def _as_blob(payload: bytes) -> dict:
    return {"type": "msgpack", "data": base64.b64encode(payload).decode()}


def _input_write_of(data: dict, text: str) -> dict:
    serde = JsonPlusSerializer(allowed_msgpack_modules=None)
    for checkpoint in data["checkpoints"]:
        for write in checkpoint["writes"]:
            if write["channel"] == "messages":
                blob = write["value"]
                value = serde.loads_typed((blob["type"], base64.b64decode(blob["data"])))
                if any(getattr(m, "content", None) == text for m in value):
                    return write
    raise AssertionError(f"no write of {text!r}")


BLOCKED = r"cannot be decoded \(the type os\.system is not allowed\)"


@pytest.mark.parametrize(
    ("place", "message"),
    [
        ("checkpoint blob", rf"checkpoint \S+: 'checkpoint' {BLOCKED}"),
        ("message on the head's branch", rf"checkpoint \S+, write #\d+: 'value' {BLOCKED}"),
        ("message on an abandoned branch", rf"checkpoint \S+, write #\d+: 'value' {BLOCKED}"),
    ],
)
def test_a_tampered_export_runs_no_code_and_is_not_imported(
    source: Path, tmp_path: Path, place: str, message: str
):
    control, marker = tmp_path / "control", tmp_path / "pwned"
    # the payload is live: the permissive default serializer would run it
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", _system_call(control)))
    assert control.exists()

    data = exported(source)
    payload = _system_call(marker)
    if place == "checkpoint blob":
        data["checkpoints"][-1]["checkpoint"] = _as_blob(payload)
    else:
        text = "what is 2 plus 3" if "head" in place else "what is the weather in Paris"
        # a list holding one "message" that is the os.system call
        list_payload = b"\x91" + payload
        _input_write_of(data, text)["value"] = _as_blob(list_payload)

    with pytest.raises(UsageError, match=message):
        import_into(source, data, "copy")
    assert not marker.exists()
    assert thread_is_absent(source, "copy")


def test_a_failure_midway_leaves_no_partial_thread(source: Path, monkeypatch: pytest.MonkeyPatch):
    data = exported(source)
    with open_database(source) as database:
        saver = database.saver
        calls = []
        real_put_writes = saver.put_writes

        def failing_put_writes(*args, **kwargs):
            calls.append(args)
            if len(calls) == 6:
                raise sqlite3.OperationalError("disk I/O error")
            return real_put_writes(*args, **kwargs)

        monkeypatch.setattr(saver, "put_writes", failing_put_writes)
        with pytest.raises(sqlite3.OperationalError):
            import_thread(database, data, "copy")
    assert len(calls) == 6
    assert thread_is_absent(source, "copy")


# --- export files ------------------------------------------------------------------------------


def test_read_export_file_accepts_an_export_written_to_disk(source: Path, tmp_path: Path):
    path = tmp_path / "src.json"
    path.write_text(json.dumps(exported(source)), encoding="utf-8")
    assert read_export_file(path)["thread_id"] == "src"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        (b"{oops", r"is not JSON \(line 1"),
        (b"\xff\xfe\x00garbage", "is not JSON"),
        (b"[1, 2]", r"not a Waypoint thread export \(it holds a JSON list"),
        (b'{"format": "' + b"x" * 100 + b'"}', "larger than|MiB"),
    ],
)
def test_read_export_file_refuses_unusable_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None, message: str
):
    monkeypatch.setattr(archive, "MAX_EXPORT_BYTES", 64)
    path = tmp_path / "export.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        read_export_file(path)


def test_read_export_file_refuses_a_directory(tmp_path: Path):
    with pytest.raises(UsageError, match="not a regular file"):
        read_export_file(tmp_path)


# --- markdown ----------------------------------------------------------------------------------


def test_markdown_transcript_shows_the_head_turns_tools_and_answers(source: Path):
    with open_database(source) as database:
        text = export_markdown(database, "src")
    lines = text.splitlines()
    assert lines[0] == "# Waypoint thread `src`"
    expected_in_order = [
        "## Turn 1",
        "> what is 2 plus 3",
        '**Tool call** `calculator` `{"expression": "2 + 3"}`',
        "2 + 3 = 5",
        "## Turn 2",
        "> read missing.txt",
        '**Tool call** `read_file` `{"path": "missing.txt"}` ✗',
        "Result ✗ (error):",
        "file 'missing.txt' does not exist in the workspace",
        "## Turn 3",
        "> what is 5 plus 5",
        "5 + 5 = 10",
    ]
    positions = [lines.index(line) for line in expected_in_order]
    assert positions == sorted(positions)
    assert "✗" not in lines[lines.index(expected_in_order[2])]
    assert sum("✗" in line for line in lines) == 2
    # only the head's branch: the rolled-back turn is not in the transcript
    assert "Paris" not in text


def test_markdown_export_after_compact_keeps_every_turn_in_full(isolated: Path):
    from tests.test_timetravel import seed

    questions = [f"what is {n} plus {n}" for n in range(1, 7)]
    seed("long", *questions)
    assert run_cli_compact("long") > 0
    with open_database(load_settings().db) as database:
        text = export_markdown(database, "long")

    lines = text.splitlines()
    assert "6 turns." in lines
    headings = [line for line in lines if line.startswith("## Turn")]
    assert headings == [f"## Turn {n}" for n in range(1, 7)]
    for n, question in enumerate(questions, start=1):
        assert f"> {question}" in lines and f"{n} + {n} = {2 * n}" in lines
    marked = lines.count("_Summarised in the model's context; shown here in full._")
    assert marked == 5  # /compact keeps the last turn whole in the model's context
    assert "summary" not in text.lower().replace("summarised in the model's context", "")


def run_cli_compact(thread: str) -> int:
    import io

    from rich.console import Console

    from app.cli.render import JsonlRenderer
    from app.service.context import make_context
    from app.service.session import ChatSession

    settings = load_settings()
    with open_checkpointer(settings.db) as saver:
        session = ChatSession(settings, saver, thread, make_context(settings))
        return session.compact(JsonlRenderer(Console(file=io.StringIO())))


def test_markdown_export_shows_the_users_wording_not_the_models_advice(isolated: Path):
    from tests.conftest import run_cli

    for _ in range(2):  # the second write would overwrite: refused under --approve never
        run_cli("chat", "-t", "w", "-m", "write 'x' to a.txt", "--approve", "never")
    exported = run_cli("export", "-t", "w", "-f", "md")
    text = exported.stdout.decode()
    assert "not run: it overwrites the existing file 'a.txt' and was not approved" in text
    assert "Do not retry it unchanged" not in text and "ask the user" not in text
