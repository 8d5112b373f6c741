"""Workspace time travel: the files the agent wrote follow the conversation back and forth.

The journal is the conversation itself: every successful `write_file` / `edit_file` result carries an
artifact with the file's text after and before the call, stored once (DeltaChannel) in the same
database as the checkpoints. The files at a checkpoint are those results folded in order; restoring
compares two such folds, and what the files were before the agent first touched them, with the disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage

from tools.errors import ToolError
from tools.file_tools import FILE_WRITING_TOOLS
from tools.files import Workspace, printable


@dataclass
class WorkspaceReport:
    """What a restore changed, and what it left alone because someone else changed it."""

    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed or self.conflicts)

    def lines(self) -> list[str]:
        """One line per file, its name escaped (a newline in it cannot start another line)."""
        return (
            [f"restored {printable(path)}" for path in self.written]
            + [
                f"removed {printable(path)} (written after the target checkpoint)"
                for path in self.removed
            ]
            + [
                f"left {printable(path)} alone: it was changed outside Waypoint, or its earlier "
                "text is unknown (use --force to overwrite)"
                for path in self.conflicts
            ]
        )


@dataclass(frozen=True)
class FileWrite:
    path: str
    content: str
    previous: str | None  # the text before the write; None: the file did not exist
    previous_known: bool


def file_writes(messages: Sequence[AnyMessage]) -> list[FileWrite]:
    """Every successful write or edit by the agent, in order, from the tools' journal artifacts."""
    calls = {
        call["id"]: call for m in messages if isinstance(m, AIMessage) for call in m.tool_calls
    }
    writes = []
    for message in messages:
        if not isinstance(message, ToolMessage) or message.status == "error":
            continue
        if message.name not in FILE_WRITING_TOOLS:
            continue
        entry = _entry(message, calls.get(message.tool_call_id))
        if entry is not None:
            writes.append(entry)
    return writes


def _entry(message: ToolMessage, call: ToolCall | None) -> FileWrite | None:
    artifact = message.artifact if isinstance(message.artifact, dict) else None
    try:
        if artifact is not None:
            return FileWrite(
                Workspace.normalize(str(artifact["path"])),
                str(artifact["content"]),
                artifact.get("previous"),
                bool(artifact.get("previous_known", True)),
            )
        if call is not None and message.name == "write_file":  # journalled before artifacts
            return FileWrite(
                Workspace.normalize(str(call["args"]["path"])),
                str(call["args"]["content"]),
                None,
                False,
            )
    except (KeyError, ToolError):
        return None
    return None


def files_at(messages: Sequence[AnyMessage]) -> dict[str, str]:
    """Path → text of every file the agent wrote, as of the end of `messages`."""
    return {write.path: write.content for write in file_writes(messages)}


def originals(messages: Sequence[AnyMessage]) -> dict[str, FileWrite]:
    """Per path, the agent's first write: its `previous` is the file as it was before the agent."""
    first: dict[str, FileWrite] = {}
    for write in file_writes(messages):
        first.setdefault(write.path, write)
    return first


def restore_workspace(
    root: Path,
    current: Sequence[AnyMessage],
    target: Sequence[AnyMessage],
    *,
    force: bool = False,
) -> WorkspaceReport:
    """Make the agent's files what they were at the end of `target`, assuming the disk is as at the
    end of `current`. A file the agent never wrote is never touched; one the agent overwrote gets its
    earlier text back; one it created is removed; a file changed by someone else is left alone."""
    workspace = Workspace(root)
    report = WorkspaceReport()
    now, then = files_at(current), files_at(target)
    first = originals(target) | originals(current)
    for path in sorted(now.keys() | then.keys()):
        wanted, wanted_known = _state(path, then, first)
        expected, expected_known = _state(path, now, first)
        on_disk = _read(workspace, path)
        if on_disk == wanted and wanted_known:
            continue
        if not force and (not wanted_known or not expected_known or on_disk != expected):
            report.conflicts.append(path)
            continue
        if wanted is None:
            if on_disk is not None:
                workspace.remove(path)
                report.removed.append(path)
        else:
            workspace.write(path, wanted)
            report.written.append(path)
    return report


def _state(
    path: str, files: dict[str, str], first: dict[str, FileWrite]
) -> tuple[str | None, bool]:
    """(text or None for absent, known) of `path` in a history whose agent files are `files`."""
    if path in files:
        return files[path], True
    original = first[path]
    return original.previous, original.previous_known


def _read(workspace: Workspace, path: str) -> str | None:
    try:
        return workspace.read(path)
    except ToolError:
        return None
