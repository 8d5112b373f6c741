"""The file tools the model calls (read, write, edit, list), bound to one Workspace.

Writes and edits return an artifact {path, content, previous} with the file's text after and before the
call: stored in the conversation, it is the journal that workspace time travel replays.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from tools.errors import ToolError, ToolInputError
from tools.files import Entry, Listing, Workspace, normalized, printable

PATH_HELP = "File path relative to the workspace root, e.g. 'notes/a.txt'."
FILE_WRITING_TOOLS = frozenset({"write_file", "edit_file"})


class ReadFileArgs(BaseModel):
    path: str = Field(description=PATH_HELP)


class WriteFileArgs(BaseModel):
    path: str = Field(description=PATH_HELP)
    content: str = Field(description="The complete new text of the file.")


class EditFileArgs(BaseModel):
    path: str = Field(description=PATH_HELP)
    old_text: str = Field(description="The exact text to replace; it must occur exactly once.")
    new_text: str = Field(description="The text to put in its place.")


class ListFilesArgs(BaseModel):
    path: str = Field(
        default=".", description="Directory relative to the workspace root; '.' is the root."
    )


def format_listing(listing: Listing) -> str:
    """Render a listing one entry per line, e.g. 'notes/  (dir)' or 'a.txt  12 bytes'."""
    lines = [_format_entry(entry) for entry in listing]
    if listing.omitted:
        lines.append(f"... and {listing.omitted} more entries not shown")
    return "\n".join(lines) if lines else "(empty)"


def _format_entry(entry: Entry) -> str:
    name = printable(entry.name)
    if entry.kind == "dir":
        return f"{name}/  (dir)"
    if entry.kind == "file":
        return f"{name}  {entry.size} bytes"
    if entry.kind == "symlink":
        return f"{name}  (symlink, not followed)"
    return f"{name}  (special file)"


def current_text(workspace: Workspace, path: str) -> tuple[str | None, bool]:
    """(text, known): the file's text before a write; known=False when it exists but is unreadable."""
    try:
        return workspace.read(path), True
    except ToolError:
        return None, not workspace.exists(path)


def make_file_tools(workspace: Workspace) -> list[BaseTool]:
    """Build read_file, write_file, edit_file and list_files bound to ``workspace``."""

    def read_file(path: str) -> str:
        """Read a UTF-8 text file from the workspace."""
        return workspace.read(path)

    def write_file(path: str, content: str) -> tuple[str, dict]:
        """Write text to a file in the workspace (creates or replaces it)."""
        previous, known = current_text(workspace, path)
        result = workspace.write(path, content)
        outcome = "created" if result.created else "replaced"
        message = f"wrote {result.bytes_written} bytes to {printable(result.path)} ({outcome})"
        return message, journal(result.path, content, previous, known)

    def edit_file(path: str, old_text: str, new_text: str) -> tuple[str, dict]:
        """Replace one exact snippet of a workspace file with new text (read_file it first)."""
        result, before = workspace.edit(path, old_text, new_text)
        after = before.replace(old_text, new_text, 1)
        return f"edited {printable(result.path)} ({result.bytes_written} bytes now)", journal(
            result.path, after, before, True
        )

    def list_files(path: str = ".") -> str:
        """List the files and folders in a workspace directory."""
        return format_listing(workspace.list(path))

    def edit_risk(args: dict) -> str:
        return f"edits the file '{printable(str(args.get('path', '')))}'"

    def overwrite_risk(args: dict) -> str | None:
        path = str(args.get("path", ""))
        try:
            exists = workspace.exists(path)
        except ToolError:
            return None  # the tool itself will refuse the path
        return f"overwrites the existing file '{printable(path)}'" if exists else None

    return [
        StructuredTool.from_function(read_file, args_schema=ReadFileArgs),
        StructuredTool.from_function(
            write_file,
            args_schema=WriteFileArgs,
            response_format="content_and_artifact",
            metadata={
                "risk": overwrite_risk,
                "approval": "when it overwrites a file",
                "side_effects": True,
            },
        ),
        StructuredTool.from_function(
            edit_file,
            args_schema=EditFileArgs,
            response_format="content_and_artifact",
            metadata={"risk": edit_risk, "side_effects": True},
        ),
        StructuredTool.from_function(list_files, args_schema=ListFilesArgs),
    ]


def journal(path: str, content: str, previous: str | None, previous_known: bool) -> dict:
    return {
        "path": path,
        "content": content,
        "previous": previous,
        "previous_known": previous_known,
    }


def sparing(tools: Sequence[BaseTool], paths: Collection[str]) -> Sequence[BaseTool]:
    """`tools` with write_file and edit_file refusing `paths` (files changed outside Waypoint that
    a replay left alone): the replayed call gets a tool error instead of overwriting them."""
    spared = {normalized_path(p) for p in paths}
    if not spared:
        return tools
    return [_refusing(tool, spared) if tool.name in FILE_WRITING_TOOLS else tool for tool in tools]


def normalized_path(path: str) -> str:
    try:
        return normalized(path)
    except ToolError:
        return path


def _refusing(tool: BaseTool, spared: set[str]) -> BaseTool:
    assert isinstance(tool, StructuredTool) and tool.func is not None
    write = tool.func

    def guarded(**arguments: object) -> object:
        path = str(arguments.get("path", ""))
        if normalized_path(path) in spared:
            raise ToolInputError(
                f"'{printable(path)}' was changed outside Waypoint, so this replay leaves it alone "
                "and did not write it; tell the user (replay with --force to overwrite it)",
                user_message=f"'{printable(path)}' was changed outside Waypoint, so the replay "
                "left it alone (replay with --force to overwrite it)",
            )
        return write(**arguments)

    return tool.model_copy(update={"func": guarded})
