"""Workspace time travel: the files the agent wrote follow the conversation back and forth.

The journal is the conversation itself: every successful `write_file` call in a checkpoint's messages
holds the path and the full content, stored once (DeltaChannel) in the same database. The files at a
checkpoint are those calls folded in order; restoring compares two such folds with what is on disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from tools.errors import ToolError
from tools.files import Workspace

FILE_WRITING_TOOLS = {"write_file"}


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
        return (
            [f"restored {path}" for path in self.written]
            + [f"removed {path} (written after the target checkpoint)" for path in self.removed]
            + [
                f"left {path} alone: it was changed outside Waypoint (use --force to overwrite)"
                for path in self.conflicts
            ]
        )


def files_at(messages: Sequence[AnyMessage]) -> dict[str, str]:
    """Path → content of every file the agent wrote successfully, as of the end of `messages`."""
    succeeded = {
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.status != "error"
    }
    files: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            if call["name"] in FILE_WRITING_TOOLS and call["id"] in succeeded:
                try:
                    files[Workspace.normalize(str(call["args"]["path"]))] = str(
                        call["args"]["content"]
                    )
                except (KeyError, ToolError):
                    continue
    return files


def restore_workspace(
    root: Path, current: dict[str, str], target: dict[str, str], *, force: bool = False
) -> WorkspaceReport:
    """Make the agent's files match `target`, assuming disk matches `current`; never clobber silently."""
    workspace = Workspace(root)
    report = WorkspaceReport()
    for path in sorted(current.keys() | target.keys()):
        wanted, expected = target.get(path), current.get(path)
        on_disk = _read(workspace, path)
        if on_disk == wanted:
            continue
        if on_disk != expected and not force:
            report.conflicts.append(path)
            continue
        if wanted is None:
            workspace.remove(path)
            report.removed.append(path)
        else:
            workspace.write(path, wanted)
            report.written.append(path)
    return report


def _read(workspace: Workspace, path: str) -> str | None:
    try:
        return workspace.read(path)
    except ToolError:
        return None
