"""Tests for the workspace file tools: round trips, confinement and refusal of unsafe files."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from tools.errors import ToolError, ToolInputError, ToolLimitError, ToolNotFoundError
from tools.file_tools import make_file_tools
from tools.files import Entry, Workspace, WriteResult


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace(root)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret file next to (not inside) the workspace."""
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    secret = secret_dir / "secret.txt"
    secret.write_text("top secret")
    return secret


def tools_by_name(ws: Workspace) -> dict:
    return {t.name: t for t in make_file_tools(ws)}


# --- round trips ------------------------------------------------------------------------------


def test_workspace_root_is_created_private_with_parents(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "er" / "workspace"
    Workspace(root)
    assert root.is_dir()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_write_read_list_round_trip(ws: Workspace, root: Path) -> None:
    result = ws.write("a.txt", "héllo\n")
    assert result == WriteResult(path="a.txt", bytes_written=7, created=True)
    assert ws.read("a.txt") == "héllo\n"
    assert ws.list() == [Entry(name="a.txt", kind="file", size=7)]
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == 0o600


def test_write_creates_nested_directories_inside_workspace(ws: Workspace, root: Path) -> None:
    result = ws.write("notes/2024/march/todo.txt", "buy milk")
    assert result.path == "notes/2024/march/todo.txt"
    assert (root / "notes" / "2024" / "march" / "todo.txt").read_text() == "buy milk"
    assert ws.list("notes") == [Entry(name="2024", kind="dir")]
    assert stat.S_IMODE((root / "notes").stat().st_mode) == 0o700


def test_dot_components_and_trailing_slashes_are_normalised(ws: Workspace) -> None:
    result = ws.write("./notes//a.txt", "x")
    assert result.path == "notes/a.txt"
    assert ws.read("notes/./a.txt") == "x"
    assert ws.list("notes/") == [Entry(name="a.txt", kind="file", size=1)]


def test_overwrite_replaces_atomically_without_leftover_temp_files(
    ws: Workspace, root: Path
) -> None:
    ws.write("notes/a.txt", "old content that is longer")
    old_inode = (root / "notes" / "a.txt").stat().st_ino
    with open(root / "notes" / "a.txt") as reader:  # a reader holding the old file
        result = ws.write("notes/a.txt", "new")
        assert reader.read() == "old content that is longer"
    assert result == WriteResult(path="notes/a.txt", bytes_written=3, created=False)
    assert ws.read("notes/a.txt") == "new"
    # A new inode means the file was renamed into place rather than truncated and rewritten.
    assert (root / "notes" / "a.txt").stat().st_ino != old_inode
    assert os.listdir(root / "notes") == ["a.txt"]


def test_disk_full_is_reported_and_leaves_old_content_and_no_temp_file(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws.write("a.txt", "original")

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(ToolLimitError, match="the disk is full; nothing was written"):
        ws.write("a.txt", "replacement")
    monkeypatch.undo()
    assert ws.read("a.txt") == "original"
    assert os.listdir(root) == ["a.txt"]


# --- path validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../x", "outside the workspace"),
        ("a/../../x", "outside the workspace"),
        ("a/../b", "outside the workspace"),
        ("..", "outside the workspace"),
        ("/etc/passwd", "absolute"),
        ("", "empty"),
        ("   ", "empty"),
        ("a\x00b", "NUL byte"),
    ],
)
def test_bad_paths_are_refused_for_read_write_and_list(
    ws: Workspace, path: str, message: str
) -> None:
    with pytest.raises(ToolInputError, match=message):
        ws.read(path)
    with pytest.raises(ToolInputError, match=message):
        ws.write(path, "x")
    with pytest.raises(ToolInputError, match=message):
        ws.list(path)


def test_outside_message_tells_the_model_what_to_do(ws: Workspace) -> None:
    with pytest.raises(ToolInputError) as info:
        ws.read("../x")
    assert str(info.value) == (
        "path '../x' is outside the workspace; use a path relative to the workspace root"
    )


def test_sibling_prefix_directory_is_unreachable(tmp_path: Path, ws: Workspace) -> None:
    evil = tmp_path / "workspace_evil"
    evil.mkdir()
    (evil / "x").write_text("evil secret")
    with pytest.raises(ToolInputError, match="outside the workspace"):
        ws.read("../workspace_evil/x")
    with pytest.raises(ToolInputError, match="outside the workspace"):
        ws.write("../workspace_evil/x", "overwritten")
    assert (evil / "x").read_text() == "evil secret"


def test_overlong_name_is_a_tool_error_not_an_os_error(ws: Workspace) -> None:
    with pytest.raises(ToolInputError, match="too long"):
        ws.write("a" * 300, "x")


@pytest.mark.parametrize(
    "path",
    ["a" * 256, "é" * 128, f"notes/{'b' * 300}.txt", f"{'d' * 300}/x.txt", "x/" * 2100 + "y"],
    ids=["256-ascii", "256-utf8", "file-in-dir", "dir", "path-over-4095"],
)
def test_a_name_over_255_bytes_is_a_tool_error_in_every_file_tool(ws: Workspace, path: str) -> None:
    """The tools and the approval check look at the path before using it: an OSError there
    (ENAMETOOLONG from a stat) used to escape the tool's error handling and fail the turn."""
    tools = tools_by_name(ws)
    calls = {
        "read_file": {"path": path},
        "write_file": {"path": path, "content": "x"},
        "edit_file": {"path": path, "old_text": "a", "new_text": "b"},
        "list_files": {"path": path},
    }
    for name, args in calls.items():
        with pytest.raises(ToolInputError, match="too long"):
            tools[name].invoke(args)
    assert tools["write_file"].metadata["risk"]({"path": path}) is None
    assert ws.list() == []


def test_a_path_with_lone_surrogates_is_a_tool_error(ws: Workspace) -> None:
    tools = tools_by_name(ws)
    with pytest.raises(ToolInputError, match="lone surrogates"):
        tools["write_file"].invoke({"path": "a\ud800.txt", "content": "x"})
    assert tools["write_file"].metadata["risk"]({"path": "a\ud800.txt"}) is None


# --- symlinks, hard links and special files ---------------------------------------------------


def test_symlinked_file_pointing_outside_is_refused(
    ws: Workspace, root: Path, outside: Path
) -> None:
    (root / "link.txt").symlink_to(outside)
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.read("link.txt")
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.write("link.txt", "pwned")
    assert outside.read_text() == "top secret"
    assert (root / "link.txt").is_symlink()


def test_symlink_to_a_file_inside_the_workspace_is_refused_too(ws: Workspace, root: Path) -> None:
    ws.write("real.txt", "data")
    (root / "alias.txt").symlink_to(root / "real.txt")
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.read("alias.txt")


def test_symlinked_directory_pointing_outside_is_refused(
    ws: Workspace, root: Path, outside: Path
) -> None:
    (root / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.read("linkdir/secret.txt")
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.write("linkdir/secret.txt", "pwned")
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.write("linkdir/sub/new.txt", "planted")
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.list("linkdir")
    assert outside.read_text() == "top secret"
    assert sorted(os.listdir(outside.parent)) == ["secret.txt"]


def test_hard_link_to_an_outside_file_is_refused(ws: Workspace, root: Path, outside: Path) -> None:
    os.link(outside, root / "hard.txt")
    with pytest.raises(ToolInputError, match="hard links"):
        ws.read("hard.txt")
    with pytest.raises(ToolInputError, match="hard links"):
        ws.write("hard.txt", "pwned")
    assert outside.read_text() == "top secret"


@pytest.mark.timeout(10)
def test_fifo_is_refused_without_hanging(ws: Workspace, root: Path) -> None:
    os.mkfifo(
        root / "pipe"
    )  # opening it to read would block forever: the timeout mark catches that
    with pytest.raises(ToolInputError, match="special file"):
        ws.read("pipe")
    with pytest.raises(ToolInputError, match="special file"):
        ws.write("pipe", "x")
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)


def test_symlink_to_dev_zero_is_refused(ws: Workspace, root: Path) -> None:
    (root / "zero").symlink_to("/dev/zero")
    with pytest.raises(ToolInputError, match="symbolic link"):
        ws.read("zero")


@pytest.mark.timeout(10)
def test_character_device_is_refused(ws: Workspace, root: Path) -> None:
    try:
        os.mknod(root / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating device nodes needs CAP_MKNOD")
    with pytest.raises(ToolInputError, match="special file"):
        ws.read("zero")
    with pytest.raises(ToolInputError, match="special file"):
        ws.write("zero", "x")


# --- size limits and content ------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_huge_sparse_file_is_refused_instantly_by_the_size_cap(ws: Workspace, root: Path) -> None:
    with open(root / "huge.bin", "wb") as f:
        f.truncate(5 * 1024**3)
    # The reported size is the full 5 GiB: the cap came from fstat, not from reading.
    with pytest.raises(ToolLimitError, match="is 5368709120 bytes, over the 1000000-byte read"):
        ws.read("huge.bin")


def test_read_cap_is_inclusive(root: Path) -> None:
    ws = Workspace(root, max_read_bytes=10)
    ws.write("ten.txt", "x" * 10)
    ws.write("eleven.txt", "x" * 11)
    assert ws.read("ten.txt") == "x" * 10
    with pytest.raises(ToolLimitError, match="11 bytes"):
        ws.read("eleven.txt")


def test_oversized_write_is_refused_and_nothing_is_written(root: Path) -> None:
    ws = Workspace(root, max_write_bytes=10)
    # Six characters but twelve bytes: the cap is on encoded size.
    with pytest.raises(ToolLimitError, match="nothing was written"):
        ws.write("sub/big.txt", "é" * 6)
    assert os.listdir(root) == []
    assert ws.write("ok.txt", "x" * 10).bytes_written == 10


def test_default_write_cap_is_one_million_bytes(ws: Workspace, root: Path) -> None:
    with pytest.raises(ToolLimitError):
        ws.write("big.txt", "x" * 1_000_001)
    assert not (root / "big.txt").exists()


def test_non_utf8_file_is_refused_with_a_clear_message(ws: Workspace, root: Path) -> None:
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ToolInputError, match="binary or non-UTF-8 file"):
        ws.read("image.png")


def test_lone_surrogates_in_content_are_refused(ws: Workspace, root: Path) -> None:
    with pytest.raises(ToolInputError, match="UTF-8"):
        ws.write("a.txt", "bad \ud800")
    assert not (root / "a.txt").exists()


# --- directories and missing paths ------------------------------------------------------------


def test_reading_a_directory_is_refused(ws: Workspace) -> None:
    ws.write("docs/readme.txt", "hi")
    with pytest.raises(ToolInputError, match=r"is a directory.*list_files"):
        ws.read("docs")
    with pytest.raises(ToolInputError, match="workspace directory itself"):
        ws.read(".")


def test_writing_over_a_directory_is_refused(ws: Workspace) -> None:
    ws.write("docs/readme.txt", "hi")
    with pytest.raises(ToolInputError, match="is a directory"):
        ws.write("docs", "x")
    assert ws.read("docs/readme.txt") == "hi"


def test_file_used_as_a_directory_is_refused(ws: Workspace) -> None:
    ws.write("a.txt", "x")
    with pytest.raises(ToolInputError, match="is a file, not a directory"):
        ws.write("a.txt/b.txt", "y")
    with pytest.raises(ToolInputError, match="is a file, not a directory"):
        ws.list("a.txt")


def test_missing_file_and_directory_are_not_found(ws: Workspace) -> None:
    with pytest.raises(ToolNotFoundError, match=r"'nope\.txt' does not exist.*list_files"):
        ws.read("nope.txt")
    with pytest.raises(ToolNotFoundError, match=r"'nodir' does not exist.*list_files"):
        ws.read("nodir/a.txt")
    with pytest.raises(ToolNotFoundError, match=r"'nodir' does not exist.*list_files"):
        ws.list("nodir")


def test_list_is_sorted_marks_directories_and_includes_hidden(ws: Workspace, root: Path) -> None:
    ws.write("b.txt", "bb")
    ws.write(".hidden", "")
    ws.write("a/inner.txt", "x")
    (root / "link").symlink_to("b.txt")
    assert ws.list(".") == [
        Entry(name=".hidden", kind="file", size=0),
        Entry(name="a", kind="dir"),
        Entry(name="b.txt", kind="file", size=2),
        Entry(name="link", kind="symlink"),
    ]


def test_list_is_capped_and_counts_what_was_left_out(root: Path) -> None:
    ws = Workspace(root, max_list_entries=3)
    for name in "edcba":
        ws.write(f"{name}.txt", "x")
    listing = ws.list()
    assert [entry.name for entry in listing] == ["a.txt", "b.txt", "c.txt"]
    assert listing.omitted == 2
    output = tools_by_name(ws)["list_files"].invoke({})
    assert output.splitlines()[-1] == "... and 2 more entries not shown"


def test_default_list_cap_is_500(ws: Workspace, root: Path) -> None:
    for i in range(502):
        (root / f"f{i:03}").touch()
    listing = ws.list()
    assert len(listing) == 500
    assert listing.omitted == 2


# --- the LangChain tools ----------------------------------------------------------------------


def test_tools_have_the_expected_names_and_descriptions(ws: Workspace) -> None:
    tools = tools_by_name(ws)
    assert set(tools) == {"read_file", "write_file", "edit_file", "list_files"}
    assert tools["read_file"].description == "Read a UTF-8 text file from the workspace."
    assert tools["write_file"].description == (
        "Write text to a file in the workspace (creates or replaces it)."
    )
    assert tools["list_files"].description == (
        "List the files and folders in a workspace directory."
    )


def test_tools_round_trip_via_invoke(ws: Workspace) -> None:
    tools = tools_by_name(ws)
    assert tools["list_files"].invoke({}) == "(empty)"
    write = tools["write_file"]
    assert write.invoke({"path": "notes/a.txt", "content": "hello world\n"}) == (
        "wrote 12 bytes to notes/a.txt (created)"
    )
    assert write.invoke({"path": "notes/a.txt", "content": "bye"}) == (
        "wrote 3 bytes to notes/a.txt (replaced)"
    )
    write.invoke({"path": "top.txt", "content": "t"})
    assert tools["read_file"].invoke({"path": "notes/a.txt"}) == "bye"
    assert tools["list_files"].invoke({"path": "."}) == "notes/  (dir)\ntop.txt  1 bytes"
    assert tools["list_files"].invoke({"path": "notes"}) == "a.txt  3 bytes"


def test_tool_errors_propagate_from_invoke(ws: Workspace) -> None:
    tools = tools_by_name(ws)
    with pytest.raises(ToolInputError, match="outside the workspace"):
        tools["read_file"].invoke({"path": "../x"})
    with pytest.raises(ToolNotFoundError):
        tools["list_files"].invoke({"path": "missing"})
    with pytest.raises(ToolError):
        tools["write_file"].invoke({"path": "/abs", "content": "x"})


def test_edit_file_replaces_exactly_one_snippet(ws: Workspace) -> None:
    tools = tools_by_name(ws)
    ws.write("a.txt", "one two three two")
    edit = tools["edit_file"]
    assert edit.invoke({"path": "a.txt", "old_text": "three", "new_text": "3"}) == (
        "edited a.txt (13 bytes now)"
    )
    assert ws.read("a.txt") == "one two 3 two"
    with pytest.raises(ToolInputError, match="appears 2 times"):
        edit.invoke({"path": "a.txt", "old_text": "two", "new_text": "2"})
    with pytest.raises(ToolNotFoundError, match="was not found"):
        edit.invoke({"path": "a.txt", "old_text": "four", "new_text": "4"})
    with pytest.raises(ToolNotFoundError, match="does not exist"):
        edit.invoke({"path": "missing.txt", "old_text": "x", "new_text": "y"})
    assert ws.read("a.txt") == "one two 3 two"


def test_writes_and_edits_journal_the_text_before_and_after(ws: Workspace) -> None:
    tools = tools_by_name(ws)

    def artifact(name: str, args: dict) -> dict:
        call = {"name": name, "args": args, "id": "c1", "type": "tool_call"}
        return tools[name].invoke(call).artifact

    first = artifact("write_file", {"path": "./n//a.txt", "content": "v1"})
    assert first == {"path": "n/a.txt", "content": "v1", "previous": None, "previous_known": True}
    second = artifact("write_file", {"path": "n/a.txt", "content": "v2 v2"})
    assert (second["previous"], second["content"]) == ("v1", "v2 v2")
    edited = artifact("edit_file", {"path": "n/a.txt", "old_text": "v2 v2", "new_text": "v3"})
    assert (edited["previous"], edited["content"]) == ("v2 v2", "v3")


def test_a_symlink_swap_race_never_reaches_outside(ws: Workspace, root: Path, tmp_path: Path):
    """A directory swapped for a symlink to the outside while the agent reads and writes through it:
    every operation either works inside the workspace or is refused; the outside is never touched."""
    import threading

    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "f.txt").write_text("SECRET")
    real, link, parked = root / "d", root / "d.link", root / "d.real"
    real.mkdir()
    (real / "f.txt").write_text("inside")
    link.symlink_to(secret_dir)
    stop = threading.Event()

    swaps = [0]

    def swap() -> None:
        while not stop.is_set():
            try:
                real.rename(parked)
                link.rename(real)  # d is now a symlink to the secret directory
                real.rename(link)
                parked.rename(real)
                swaps[0] += 1
            except OSError:  # a write re-created "d" while it was away: clear it and go on
                with contextlib.suppress(OSError):
                    if real.is_dir() and not real.is_symlink() and parked.exists():
                        shutil.rmtree(real, ignore_errors=True)
                    if not link.is_symlink() and real.is_symlink():
                        real.rename(link)
                    if parked.exists() and not real.exists():
                        parked.rename(real)

    swapper = threading.Thread(target=swap)
    swapper.start()
    seen, deadline = set(), time.monotonic() + 1.0
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(ToolError):
                seen.add(ws.read("d/f.txt"))
            with contextlib.suppress(ToolError):
                ws.write("d/f.txt", "inside")
    finally:
        stop.set()
        swapper.join()
    assert swaps[0] > 20, "the race never really ran"
    assert "SECRET" not in seen
    assert (secret_dir / "f.txt").read_text() == "SECRET"
    assert sorted(p.name for p in secret_dir.iterdir()) == ["f.txt"]


def test_names_with_control_characters_are_escaped_in_what_the_tools_say(ws: Workspace) -> None:
    """A newline or an escape sequence in a name is shown as \\n or \\x1b (the way the model writes
    it in JSON arguments), so a result or an error stays one line; the file keeps its real name."""
    tools = tools_by_name(ws)
    name, shown = "a\nb\x1b[31m.txt", "a\\nb\\x1b[31m.txt"
    result = tools["write_file"].invoke(
        {
            "name": "write_file",
            "args": {"path": name, "content": "x"},
            "id": "c1",
            "type": "tool_call",
        }
    )
    assert result.content == f"wrote 1 bytes to {shown} (created)"
    assert result.artifact["path"] == name  # the journal keeps the real name
    assert ws.read(name) == "x"
    assert tools["list_files"].invoke({}) == f"{shown}  1 bytes"
    assert tools["write_file"].metadata["risk"]({"path": name}) == (
        f"overwrites the existing file '{shown}'"
    )
    with pytest.raises(ToolNotFoundError) as missing:
        tools["read_file"].invoke({"path": f"missing-{name}"})
    assert f"file 'missing-{shown}' does not exist" in str(missing.value)
    with pytest.raises(ToolInputError) as outside:
        tools["read_file"].invoke({"path": f"../{name}"})
    assert f"path '../{shown}' is outside" in str(outside.value)
