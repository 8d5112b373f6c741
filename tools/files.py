"""File tools confined to one workspace directory.

Every path is walked component by component from a directory fd with O_NOFOLLOW, so symlinks,
hard links, FIFOs, devices and oversized files are refused instead of followed, hung on or read.
"""

from __future__ import annotations

import builtins
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tools.errors import ToolError, ToolInputError, ToolLimitError, ToolNotFoundError

DEFAULT_MAX_READ_BYTES = 1_000_000
DEFAULT_MAX_WRITE_BYTES = 1_000_000
DEFAULT_MAX_LIST_ENTRIES = 500

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_MODE = 0o600
_DIR_MODE = 0o700
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# Linux's NAME_MAX and PATH_MAX: checked up front, so an overlong name is refused with the same clear
# error on every path (a stat of it raises ENAMETOOLONG, outside any tool's error handling).
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4095

EntryKind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True)
class WriteResult:
    """Outcome of a successful write: normalised path, bytes written, whether the file was new."""

    path: str
    bytes_written: int
    created: bool


@dataclass(frozen=True)
class Entry:
    """One directory entry. ``size`` is set for regular files only; symlinks are never followed."""

    name: str
    kind: EntryKind
    size: int | None = None


class Listing(list[Entry]):
    """The (capped) entries of a directory, sorted by name; ``omitted`` counts entries left out."""

    def __init__(self, entries: Iterable[Entry] = (), omitted: int = 0) -> None:
        super().__init__(entries)
        self.omitted = omitted


class Workspace:
    """A directory the file tools may read and write; nothing outside it is reachable."""

    def __init__(
        self,
        root: Path,
        *,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        max_write_bytes: int = DEFAULT_MAX_WRITE_BYTES,
        max_list_entries: int = DEFAULT_MAX_LIST_ENTRIES,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.max_list_entries = max_list_entries

    def read(self, path: str) -> str:
        """Return the text of a regular, singly linked, UTF-8 file of at most max_read_bytes."""
        parts = _split(path, allow_root=False)
        shown = printable("/".join(parts))
        with _os_errors_as_tool_errors(shown, "read"):
            dir_fd = self._open_dir(parts[:-1])
            try:
                _refuse_special(dir_fd, parts[-1], shown, for_write=False)
                fd = _open_final(dir_fd, parts[-1], shown)
            finally:
                os.close(dir_fd)
            try:
                st = os.fstat(fd)
                _check_regular(st, shown, for_write=False)
                if st.st_size > self.max_read_bytes:
                    raise _too_big_to_read(shown, st.st_size, self.max_read_bytes)
                data = _read_at_most(fd, self.max_read_bytes + 1)
            finally:
                os.close(fd)
        if len(data) > self.max_read_bytes:  # the file grew after fstat
            raise _too_big_to_read(shown, len(data), self.max_read_bytes)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolInputError(
                f"'{shown}' is a binary or non-UTF-8 file and cannot be read as text; "
                "only UTF-8 text files can be read"
            ) from None

    def write(self, path: str, content: str) -> WriteResult:
        """Create or atomically replace a file (mode 0o600), creating missing parent directories."""
        parts = _split(path, allow_root=False)
        normalized = "/".join(parts)
        shown = printable(normalized)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolInputError(
                "content contains characters that cannot be encoded as UTF-8 (lone surrogates); "
                "remove them and try again"
            ) from None
        if len(data) > self.max_write_bytes:
            raise ToolLimitError(
                f"content is {len(data)} bytes, over the {self.max_write_bytes}-byte limit; "
                "nothing was written; write a shorter text or split it across several files"
            )
        name = parts[-1]
        with _os_errors_as_tool_errors(shown, "write"):
            dir_fd = self._open_dir(parts[:-1], create=True)
            try:
                created = _refuse_special(dir_fd, name, shown, for_write=True)
                _replace_atomically(dir_fd, name, data, shown)
            finally:
                os.close(dir_fd)
        return WriteResult(path=normalized, bytes_written=len(data), created=created)

    def edit(self, path: str, old: str, new: str) -> tuple[WriteResult, str]:
        """Replace the one exact occurrence of `old`; returns the write and the text before it."""
        if not old:
            raise ToolInputError("old_text is empty; copy the exact text to replace from read_file")
        before = self.read(path)
        count = before.count(old)
        shown = printable("/".join(_split(path, allow_root=False)))
        if count == 0:
            raise ToolNotFoundError(
                f"the text to replace was not found in '{shown}'; read_file it and copy the exact "
                "text, including whitespace"
            )
        if count > 1:
            raise ToolInputError(
                f"the text to replace appears {count} times in '{shown}'; include more of the "
                "surrounding text so it matches exactly once"
            )
        return self.write(path, before.replace(old, new, 1)), before

    def remove(self, path: str) -> None:
        """Delete a regular, singly linked file (used when time travel undoes a file's creation)."""
        parts = _split(path, allow_root=False)
        shown = printable("/".join(parts))
        with _os_errors_as_tool_errors(shown, "remove"):
            dir_fd = self._open_dir(parts[:-1])
            try:
                _refuse_special(dir_fd, parts[-1], shown, for_write=True)
                os.unlink(parts[-1], dir_fd=dir_fd)
            finally:
                os.close(dir_fd)

    @staticmethod
    def normalize(path: str) -> str:
        """The canonical form of a workspace path ('./a//b.txt' -> 'a/b.txt'); ToolError if invalid."""
        return "/".join(_split(path, allow_root=False))

    def exists(self, path: str) -> bool:
        """Whether anything (even a symlink, never followed) is at `path`; False when it cannot be
        looked at. ToolError if the path itself is invalid."""
        parts = _split(path, allow_root=False)
        try:
            dir_fd = self._open_dir(parts[:-1])
        except (ToolError, OSError):
            return False
        try:
            os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(dir_fd)
        return True

    def list(self, path: str = ".") -> Listing:
        """Return the entries of a directory sorted by name, hidden ones included, capped."""
        parts = _split(path, allow_root=True)
        shown = printable("/".join(parts)) or "."
        with _os_errors_as_tool_errors(shown, "list"):
            dir_fd = self._open_dir(parts)
            try:
                names = sorted(os.listdir(dir_fd))
                kept = names[: self.max_list_entries]
                entries = [_entry(dir_fd, name) for name in kept]
            finally:
                os.close(dir_fd)
        return Listing(entries, omitted=len(names) - len(kept))

    def _open_dir(self, parts: builtins.list[str], *, create: bool = False) -> int:
        """Open the directory ``parts`` below the root without following any symlink."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ToolError(
                "the workspace directory no longer exists; tell the user, who must recreate it",
                user_message=f"the workspace directory {self.root} no longer exists; create it",
            ) from None
        try:
            for depth, name in enumerate(parts):
                shown = printable("/".join(parts[: depth + 1]))
                next_fd = _open_subdir(fd, name, shown, create=create)
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd


def printable(text: str, keep: str = "") -> str:
    """`text` safe to show: control and other unprintable characters (a newline in a file name,
    ESC, a right-to-left override) escaped as \\n, \\x1b, \\u202e, except those in `keep`. The model
    reads the same escapes it writes in JSON arguments; the terminal shows each name on one line.
    (app/errors.py has the same rule for the app's own messages.)"""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


def normalized(path: str) -> str:
    """The path as the workspace names it ('./a//b.txt' is 'a/b.txt'); a ToolError when invalid."""
    return "/".join(_split(path, allow_root=False))


def _split(path: str, *, allow_root: bool) -> list[str]:
    """Validate a model-supplied path and return its components ('.' and empty ones dropped)."""
    if not path or not path.strip():
        raise ToolInputError(
            "path is empty; give a path relative to the workspace root, e.g. 'notes/todo.txt'"
        )
    if "\x00" in path:
        raise ToolInputError(
            "path contains a NUL byte; give a plain path relative to the workspace root"
        )
    if path.startswith("/"):
        raise ToolInputError(
            f"path '{printable(path)}' is absolute; use a path relative to the workspace root"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ToolInputError(
            f"path '{printable(path)}' is outside the workspace; use a path relative to the "
            "workspace root"
        )
    if not parts and not allow_root:
        raise ToolInputError(
            f"path '{printable(path)}' is the workspace directory itself; give a file path such "
            "as 'notes.txt', or use list_files to see what is there"
        )
    try:
        sizes = [len(part.encode("utf-8")) for part in parts]
    except UnicodeEncodeError:
        raise ToolInputError(
            "path contains characters that cannot be encoded as UTF-8 (lone surrogates); "
            "remove them and try again"
        ) from None
    for part, size in zip(parts, sizes, strict=True):
        if size > MAX_NAME_BYTES:
            raise ToolInputError(
                f"the name '{printable(part[:40])}…' is too long ({size} bytes; file and "
                f"directory names are limited to {MAX_NAME_BYTES}); use a shorter name"
            )
    if sum(sizes) + len(sizes) > MAX_PATH_BYTES:
        raise ToolInputError(
            f"path '{printable(path[:40])}…' is too long (over {MAX_PATH_BYTES} bytes); use a "
            "shorter path"
        )
    return parts


def _open_subdir(dir_fd: int, name: str, shown: str, *, create: bool) -> int:
    try:
        return _open_dir_entry(dir_fd, name, shown)
    except ToolNotFoundError:
        if not create:
            raise
    # If it appeared concurrently, the O_NOFOLLOW open below still vets whatever is there now.
    with suppress(FileExistsError):
        os.mkdir(name, _DIR_MODE, dir_fd=dir_fd)
    return _open_dir_entry(dir_fd, name, shown)


def _open_dir_entry(dir_fd: int, name: str, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ToolNotFoundError(
            f"directory '{shown}' does not exist; use list_files to see which files and "
            "directories exist",
            user_message=_missing(shown, "directory"),
        ) from None
    except OSError as exc:
        # With O_DIRECTORY|O_NOFOLLOW Linux reports a symlink as ENOTDIR, so look closer.
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise _not_a_directory(dir_fd, name, shown) from None
        raise


def _open_final(dir_fd: int, name: str, shown: str) -> int:
    try:
        return os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ToolNotFoundError(
            f"file '{shown}' does not exist; use list_files to see what is there",
            user_message=_missing(shown, "file"),
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_refused(shown) from None
        raise


def _refuse_special(dir_fd: int, name: str, shown: str, *, for_write: bool) -> bool:
    """Refuse anything but a regular, singly linked file; return True if ``name`` is absent.

    Checked with lstat before opening so devices are never opened; reads re-check with fstat.
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        if for_write:
            return True
        raise ToolNotFoundError(
            f"file '{shown}' does not exist; use list_files to see what is there",
            user_message=_missing(shown, "file"),
        ) from None
    _check_regular(st, shown, for_write=for_write)
    return False


def _check_regular(st: os.stat_result, shown: str, *, for_write: bool) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _symlink_refused(shown)
    if stat.S_ISDIR(st.st_mode):
        hint = "choose a file name inside it" if for_write else "use list_files to see its contents"
        raise ToolInputError(f"'{shown}' is a directory, not a file; {hint}")
    if not stat.S_ISREG(st.st_mode):
        raise ToolInputError(
            f"'{shown}' is a special file (FIFO, socket or device), not a regular file; "
            "only regular files can be read or written"
        )
    if st.st_nlink != 1:
        raise ToolInputError(
            f"'{shown}' has {st.st_nlink} hard links and is refused because it may be shared "
            "with a file outside the workspace; use a different file"
        )


def _replace_atomically(dir_fd: int, name: str, data: bytes, shown: str) -> None:
    """Write ``data`` to a new temp file in the same directory, fsync, then rename over ``name``."""
    temp = f".waypoint-{secrets.token_hex(8)}.tmp"
    fd = os.open(temp, _TEMP_FLAGS, _FILE_MODE, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, _FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        # The target may have been swapped since the first check; rename would replace a
        # symlink itself rather than follow it, but refuse anyway so behaviour is consistent.
        _refuse_special(dir_fd, name, shown, for_write=True)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    # Makes the rename durable; some filesystems refuse fsync on directories, and the data
    # itself is already synced, so that failure is not worth reporting.
    with suppress(OSError):
        os.fsync(dir_fd)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _entry(dir_fd: int, name: str) -> Entry:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:  # removed while listing
        return Entry(name=name, kind="other")
    if stat.S_ISDIR(st.st_mode):
        return Entry(name=name, kind="dir")
    if stat.S_ISREG(st.st_mode):
        return Entry(name=name, kind="file", size=st.st_size)
    if stat.S_ISLNK(st.st_mode):
        return Entry(name=name, kind="symlink")
    return Entry(name=name, kind="other")


def _not_a_directory(dir_fd: int, name: str, shown: str) -> ToolError:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return ToolInputError(f"'{shown}' is not a directory; use list_files to see what is there")
    if stat.S_ISLNK(st.st_mode):
        return _symlink_refused(shown)
    if stat.S_ISREG(st.st_mode):
        return ToolInputError(
            f"'{shown}' is a file, not a directory; use read_file to read it, or choose "
            "another path"
        )
    return ToolInputError(f"'{shown}' is not a directory; use list_files to see what is there")


def _missing(shown: str, kind: str) -> str:
    return f"{kind} '{shown}' does not exist in the workspace"


def _symlink_refused(shown: str) -> ToolInputError:
    return ToolInputError(
        f"'{shown}' is or passes through a symbolic link, and symbolic links are not followed; "
        "use a path to a regular file or directory inside the workspace"
    )


def _too_big_to_read(shown: str, size: int, limit: int) -> ToolLimitError:
    return ToolLimitError(
        f"'{shown}' is {size} bytes, over the {limit}-byte read limit; nothing was read; "
        "ask the user for a smaller file or an excerpt"
    )


@contextmanager
def _os_errors_as_tool_errors(shown: str, action: str) -> Iterator[None]:
    """Turn OSErrors escaping a file operation into ToolErrors the model can act on."""
    try:
        yield
    except OSError as exc:
        raise _tool_error_for(exc, shown, action) from exc


def _tool_error_for(exc: OSError, shown: str, action: str) -> ToolError:
    code = exc.errno
    if code in _DISK_FULL:
        return ToolLimitError("the disk is full; nothing was written")
    if code == errno.ELOOP:
        return _symlink_refused(shown)
    if code == errno.ENOENT:
        return ToolNotFoundError(
            f"'{shown}' does not exist; use list_files to see what is there",
            user_message=_missing(shown, "file"),
        )
    if code == errno.ENOTDIR:
        return ToolInputError(
            f"a component of '{shown}' is not a directory; use list_files to see what is there"
        )
    if code == errno.EISDIR:
        return ToolInputError(f"'{shown}' is a directory, not a file; use list_files instead")
    if code == errno.ENAMETOOLONG:
        return ToolInputError(f"path '{shown}' is too long; use shorter names")
    if code in (errno.EACCES, errno.EPERM):
        return ToolInputError(f"permission denied for '{shown}'; use another path")
    if code == errno.EROFS:
        return ToolLimitError("the workspace is read-only; nothing was written")
    reason = os.strerror(code) if code else str(exc)
    return ToolError(f"could not {action} '{shown}': {reason}; try again or use another path")
