"""Export a whole thread (every checkpoint and pending write, all branches) as JSON or Markdown; import it back.

Blobs travel as the saver's own serializer output (base64); import decodes them with the strict allowlist,
writes only through the saver API, and leaves nothing behind when the result cannot be loaded.
"""

from __future__ import annotations

import base64
import binascii
import json
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from langchain_core.messages import (
    AnyMessage,
    messages_to_dict,
)
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    writes_sort_key,
)

from app.db.base import Database
from app.db.compressed import uncompressed
from app.db.strict import SHAPE_ERRORS, UnreadableCheckpointError
from app.errors import UsageError
from app.service.threads import load_state, reading, thread_config
from app.service.transcript import render_markdown
from app.store import validate_thread_id
from graphs.react.graph import build_graph
from graphs.shared.summarize import is_summary
from graphs.state import unreadable_reason

FORMAT = "waypoint-thread/1"
FORMAT_NAME = "waypoint-thread"
MAX_EXPORT_BYTES = 200 * 1024 * 1024
# What JsonPlusSerializer.dumps_typed emits; "pickle" and the legacy "json" reviver are never accepted.
BLOB_TYPES = frozenset({"msgpack", "null", "bytes", "bytearray"})
HEAD_FIELDS = ("turn", "iteration", "retry_count", "status", "last_error", "call_signatures")
LOAD_ERRORS = (
    SHAPE_ERRORS  # what loading tampered data raises (UnreadableCheckpointError among them)
)


@dataclass(frozen=True)
class ImportReport:
    thread_id: str
    checkpoints: int
    writes: int


@dataclass(frozen=True)
class _Write:
    task_id: str
    channel: str
    value: Any
    task_path: str


@dataclass(frozen=True)
class _Checkpoint:
    checkpoint_id: str
    parent_id: str | None
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    writes: list[_Write]


# --- export -----------------------------------------------------------------------------------


def export_thread(database: Database, thread_id: str) -> dict:
    """Every checkpoint of the thread's root namespace, oldest first, with its writes: JSON-safe."""
    _require_thread(database, thread_id)
    saver = database.saver
    head = load_state(build_graph(saver), thread_id)
    config = thread_config(thread_id, root=True)
    with reading(thread_id, "in history"):
        tuples = list(saver.list(config))[::-1]
    task_paths = _task_paths(database, thread_id)
    checkpoints = [_export_checkpoint(saver, item, task_paths) for item in tuples]
    return {
        "format": FORMAT,
        "thread_id": thread_id,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "head": _head(head.config["configurable"].get("checkpoint_id"), head.values),
        "checkpoints": checkpoints,
    }


def _export_checkpoint(
    saver: BaseCheckpointSaver, item: CheckpointTuple, task_paths: dict[str, list[tuple]]
) -> dict:
    checkpoint_id = item.config["configurable"]["checkpoint_id"]
    parent = item.parent_config["configurable"]["checkpoint_id"] if item.parent_config else None
    pending = item.pending_writes or []
    paths = _matching_paths(task_paths.get(checkpoint_id, []), pending)
    return {
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": parent,
        "checkpoint": _dump(saver, item.checkpoint),
        "metadata": json.loads(json.dumps(item.metadata)),
        "writes": [
            {
                "task_id": task_id,
                "channel": channel,
                "value": _dump(saver, value),
                **({"task_path": paths[index]} if paths else {}),
            }
            for index, (task_id, channel, value) in enumerate(pending)
        ],
    }


def export_markdown(database: Database, thread_id: str) -> str:
    """A readable transcript of the head's branch: every turn's request, tool calls with results,
    answers — turns a summary replaced in the model's context included, in full and marked."""
    _require_thread(database, thread_id)
    graph = build_graph(database.saver)
    record = _whole_record(database, graph, thread_id)
    in_context = {m.id for m in load_state(graph, thread_id).values.get("messages", [])}
    summarised = {message_id for message_id in record if message_id not in in_context}
    return render_markdown(thread_id, list(record.values()), summarised)


def _whole_record(database: Database, graph: Any, thread_id: str) -> dict[str | None, AnyMessage]:
    """Every message of the head's branch by id, in order: a summary (a turn's start or /compact)
    drops older turns from the state, but the last checkpoint of each turn still holds that turn
    whole. A message rewritten later (an approval's edit) keeps its place and its last form."""
    from app.service.index import CheckpointIndex
    from app.service.timetravel import state_at

    ends = {row.turn: row for row in CheckpointIndex(database, thread_id).branch() if row.turn}
    record: dict[str | None, AnyMessage] = {}
    for turn in sorted(ends):
        values = state_at(graph, thread_id, ends[turn].checkpoint_id).values
        for message in values.get("messages", []):
            if not is_summary(message):
                record[message.id] = message
    return record


def _head(checkpoint_id: str | None, values: dict) -> dict:
    head = {
        "checkpoint_id": checkpoint_id,
        "messages": messages_to_dict(values.get("messages", [])),
        **{key: values.get(key) for key in HEAD_FIELDS},
    }
    # Informational only (import ignores it), so a stray non-JSON value is shown as text.
    return json.loads(json.dumps(head, default=str))


def _dump(saver: BaseCheckpointSaver, value: Any) -> dict:
    type_, data = uncompressed(saver.serde).dumps_typed(value)
    return {"type": type_, "data": base64.b64encode(data).decode("ascii")}


def _task_paths(database: Database, thread_id: str) -> dict[str, list[tuple]]:
    """Each checkpoint's writes as (task_id, channel, task_path), in the order `list` returns them.

    `CheckpointTuple.pending_writes` has no task_path, but it orders writes replayed by DeltaChannel
    across the tasks of one step, so the export carries it.
    """
    by_checkpoint: dict[str, list[tuple]] = {}
    for checkpoint_id, task_id, channel, task_path, idx in database.write_order(thread_id):
        by_checkpoint.setdefault(checkpoint_id, []).append((task_id, channel, task_path, idx))
    return {
        checkpoint_id: [
            (task_id, channel, task_path)
            for task_id, channel, task_path, idx in sorted(
                writes, key=lambda w: writes_sort_key(w[2], w[0], w[3])
            )
        ]
        for checkpoint_id, writes in by_checkpoint.items()
    }


def _matching_paths(rows: list[tuple], pending: Sequence[tuple]) -> list[str] | None:
    """The task paths of `pending`, or None if the rows do not line up (a concurrent write)."""
    if len(rows) != len(pending) or any(
        (r[0], r[1]) != (p[0], p[1]) for r, p in zip(rows, pending, strict=True)
    ):
        return None
    return [r[2] for r in rows]


def _require_thread(database: Database, thread_id: str) -> None:
    if not database.thread_exists(thread_id):
        raise UsageError(
            f"thread {thread_id} does not exist; list them with: waypoint threads list"
        )


# --- import -----------------------------------------------------------------------------------


def read_export_file(path: Path) -> dict:
    """The JSON object in `path`, or a clear error when it is missing, too large or not JSON."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UsageError(f"export file {path} does not exist") from None
    except OSError as exc:
        raise UsageError(f"cannot read the export file {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{path} is not a regular file; pass a thread export (.json)")
    if info.st_size > MAX_EXPORT_BYTES:
        raise UsageError(
            f"{path} is {info.st_size / 2**20:.0f} MiB; exports larger than "
            f"{MAX_EXPORT_BYTES // 2**20} MiB are refused"
        )
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_EXPORT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read the export file {path}: {exc.strerror}") from exc
    if len(raw) > MAX_EXPORT_BYTES:
        raise UsageError(f"{path} is larger than {MAX_EXPORT_BYTES // 2**20} MiB; refused")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    except (UnicodeDecodeError, RecursionError) as exc:
        raise UsageError(f"{path} is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(
            f"{path} is not a Waypoint thread export (it holds a JSON {type(data).__name__}, "
            "not an object)"
        )
    return data


def import_thread(database: Database, data: dict, thread_id: str) -> ImportReport:
    """Recreate an exported thread under `thread_id`: all of it, or (on any failure) nothing."""
    saver = database.saver
    checkpoints = _parse_export(saver, data)
    validate_thread_id(thread_id)
    if database.thread_exists(thread_id):
        raise UsageError(f"thread {thread_id} already exists; pass --as NEW to import it as NEW")
    try:
        for item in checkpoints:
            _put_checkpoint(saver, thread_id, item)
        _verify_imported(saver, thread_id, [c.checkpoint_id for c in checkpoints])
    except BaseException:
        saver.delete_thread(thread_id)
        raise
    return ImportReport(thread_id, len(checkpoints), sum(len(c.writes) for c in checkpoints))


def _put_checkpoint(saver: BaseCheckpointSaver, thread_id: str, item: _Checkpoint) -> None:
    # `put` takes the parent from the config's checkpoint_id and the new id from checkpoint["id"].
    saved = saver.put(
        thread_config(thread_id, item.parent_id or None, root=True),
        item.checkpoint,
        item.metadata,
        item.checkpoint["channel_versions"],
    )
    by_task: dict[tuple[str, str], list[_Write]] = {}
    for write in item.writes:
        by_task.setdefault((write.task_id, write.task_path), []).append(write)
    for (task_id, task_path), writes in by_task.items():
        # put_writes numbers regular writes by position and special ones (errors, interrupts) by
        # WRITES_IDX_MAP, so regular writes go in one call to get back their original 0..n-1.
        special = [(w.channel, w.value) for w in writes if w.channel in WRITES_IDX_MAP]
        regular = [(w.channel, w.value) for w in writes if w.channel not in WRITES_IDX_MAP]
        for batch in (special, regular):
            if batch:
                saver.put_writes(saved, batch, task_id, task_path)


def _verify_imported(saver: BaseCheckpointSaver, thread_id: str, checkpoint_ids: list[str]) -> None:
    """Every imported checkpoint must load as a valid state (the saver refuses a value of the wrong
    shape, such as a string written to `messages`, only when it reads it back)."""
    graph = build_graph(saver)
    for checkpoint_id in checkpoint_ids:
        config = thread_config(thread_id, checkpoint_id)
        try:
            reason = unreadable_reason(graph.get_state(config).values)
        except LOAD_ERRORS as exc:
            reason = _why(exc)
        if reason:
            raise UsageError(
                f"the export is damaged: checkpoint {checkpoint_id} is unreadable "
                f"({reason[:200]}); nothing was imported"
            )
    load_state(graph, thread_id)


# --- validation of the export document ----------------------------------------------------------


def _parse_export(saver: BaseCheckpointSaver, data: Any) -> list[_Checkpoint]:
    """Check the whole document and decode every blob before anything is written."""
    if not isinstance(data, dict):
        raise UsageError("not a Waypoint thread export (expected a JSON object)")
    if "format" not in data:
        raise UsageError("not a Waypoint thread export (missing 'format')")
    marker = data["format"]
    if not isinstance(marker, str) or not marker.startswith(f"{FORMAT_NAME}/"):
        raise UsageError(f"not a Waypoint thread export (format {str(marker)[:40]!r})")
    if marker != FORMAT:
        raise UsageError(
            f"unsupported export version {marker!r}; this Waypoint reads {FORMAT!r}. "
            "Import it with the Waypoint version that wrote it"
        )
    _field(data, "thread_id", str, "the export")
    raw_checkpoints = _field(data, "checkpoints", list, "the export")
    if not raw_checkpoints:
        raise UsageError("the export has no checkpoints")
    checkpoints = [_parse_checkpoint(saver, raw, n) for n, raw in enumerate(raw_checkpoints, 1)]
    ids = [c.checkpoint_id for c in checkpoints]
    if len(set(ids)) != len(ids):
        raise UsageError("the export lists a checkpoint twice")
    for item in checkpoints:
        if item.parent_id is not None and item.parent_id not in ids:
            raise UsageError(
                f"checkpoint {item.checkpoint_id}: its parent {item.parent_id} is not in the export"
            )
    return sorted(checkpoints, key=lambda c: c.checkpoint_id)


def _parse_checkpoint(saver: BaseCheckpointSaver, raw: Any, number: int) -> _Checkpoint:
    where = f"checkpoint #{number}"
    if not isinstance(raw, dict):
        raise UsageError(f"{where} is not an object")
    checkpoint_id = _field(raw, "checkpoint_id", str, where)
    where = f"checkpoint {checkpoint_id}"
    parent_id = _field(raw, "parent_checkpoint_id", (str, type(None)), where)
    metadata = _field(raw, "metadata", dict, where)
    checkpoint = _load(saver, _field(raw, "checkpoint", dict, where), f"{where}: 'checkpoint'")
    if not _is_checkpoint(checkpoint, checkpoint_id):
        raise UsageError(f"{where}: its 'checkpoint' blob is not that checkpoint")
    writes = []
    for index, write in enumerate(_field(raw, "writes", list, where)):
        at = f"{where}, write #{index + 1}"
        if not isinstance(write, dict):
            raise UsageError(f"{at} is not an object")
        value = _load(saver, _field(write, "value", dict, at), f"{at}: 'value'")
        writes.append(
            _Write(
                task_id=_field(write, "task_id", str, at),
                channel=_field(write, "channel", str, at),
                value=value,
                task_path=_field(write, "task_path", str, at) if "task_path" in write else "",
            )
        )
    return _Checkpoint(checkpoint_id, parent_id, checkpoint, metadata, writes)


def _is_checkpoint(value: Any, checkpoint_id: str) -> TypeGuard[Checkpoint]:
    """Whether a loaded blob is the checkpoint `checkpoint_id`, with its channels."""
    return (
        isinstance(value, dict)
        and value.get("id") == checkpoint_id
        and all(isinstance(value.get(k), dict) for k in ("channel_values", "channel_versions"))
    )


def _field(obj: dict, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise UsageError(f"{where} is missing the field '{key}'")
    value = obj[key]
    if not isinstance(value, kind):
        raise UsageError(f"{where}: '{key}' has the wrong type ({type(value).__name__})")
    return value


def _load(saver: BaseCheckpointSaver, blob: dict, where: str) -> Any:
    """Decode one serialised value with the saver's (strict, allowlisted) serializer."""
    type_ = _field(blob, "type", str, where)
    encoded = _field(blob, "data", str, where)
    if type_ not in BLOB_TYPES:
        raise UsageError(f"{where}: unsupported serialisation type {type_[:40]!r}")
    try:
        data = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise UsageError(f"{where}: bad base64 ({exc})") from exc
    try:
        return saver.serde.loads_typed((type_, data))
    except LOAD_ERRORS as exc:
        raise UsageError(f"{where} cannot be decoded ({_why(exc)})") from exc


def _why(exc: BaseException) -> str:
    return (
        exc.reason if isinstance(exc, UnreadableCheckpointError) else f"{type(exc).__name__}: {exc}"
    )
