"""The users file: each user's bearer token, kept as its SHA-256 only. A token is 32 random bytes
(256 bits), so its hash cannot be reversed by guessing and needs no slow KDF (those protect
passwords people choose); lookups compare hashes in constant time."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

from app.errors import ConfigError, UsageError
from app.store import THREAD_ID
from tools import clock

FILE_VERSION = 1
TOKEN_PREFIX = "wp_"  # tells a Waypoint token apart in a log or a password manager
# Names that would make a store namespace ambiguous (("memories", user) vs (user, …)).
RESERVED_NAMES = frozenset({"memories", "experiences", "users"})


@dataclass(frozen=True)
class UserEntry:
    name: str
    token_sha256: str
    created_at: str


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def valid_user_name(name: str) -> str:
    if not THREAD_ID.fullmatch(name or "") or name in {".", ".."}:
        raise UsageError(
            f"invalid user name {name[:80]!r}: use 1-64 letters, digits, '.', '_' or '-'"
        )
    if name in RESERVED_NAMES:
        raise UsageError(f"the user name {name!r} is reserved; choose another")
    return name


def read_users(path: Path) -> dict[str, UserEntry]:
    """The users in the file (none when it does not exist). A file others may write, or that is
    not a regular file, or not ours, is refused: whoever can write it can add a user."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not hang the server
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"users file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        _must_be_private(path, os.fstat(file.fileno()))
        raw = file.read()
    return _parsed(path, raw)


def _must_be_private(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"users file {path} is not a regular file")
    if info.st_mode & 0o022:
        raise ConfigError(
            f"users file {path} is writable by others (mode {stat.filemode(info.st_mode)}); "
            f"run: chmod 600 {path}"
        )
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise ConfigError(f"users file {path} belongs to another user (uid {info.st_uid})")


def _parsed(path: Path, raw: bytes) -> dict[str, UserEntry]:
    try:
        data = json.loads(raw)
        entries = data["users"]
        found = {
            name: UserEntry(name, str(e["token_sha256"]), str(e.get("created_at", "")))
            for name, e in entries.items()
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError(
            f"users file {path} is not a Waypoint users file; make it with: waypoint users add NAME"
        ) from None
    for entry in found.values():
        if len(entry.token_sha256) != 64:
            raise ConfigError(f"users file {path}: user {entry.name!r} has no valid token hash")
    return found


def write_users(path: Path, users: dict[str, UserEntry]) -> None:
    """Replace the file at once (a reader sees the old one or the new one), readable by its owner
    only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "version": FILE_VERSION,
        "users": {
            u.name: {"token_sha256": u.token_sha256, "created_at": u.created_at}
            for u in sorted(users.values(), key=lambda u: u.name)
        },
    }
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), 0o600)
            json.dump(body, file, indent=2)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def editing(path: Path) -> Iterator[dict[str, UserEntry]]:
    """The users, to change in the block and written back when it ends; two commands editing the
    file at once take turns (a lock file beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        users = read_users(path)
        yield users
        write_users(path, users)
    finally:
        os.close(lock)


def add_user(path: Path, name: str, *, replace: bool = False) -> str:
    """Add `name` with a new token (or give it a new one, with `replace`); the token is returned
    once and never stored."""
    valid_user_name(name)
    token = new_token()
    with editing(path) as users:
        if name in users and not replace:
            raise UsageError(
                f"user {name} already has a token; give a new one with: "
                f"waypoint users add {name} --replace"
            )
        created = clock.now().astimezone(UTC).isoformat(timespec="seconds")
        users[name] = UserEntry(name, token_hash(token), created)
    return token


def revoke_user(path: Path, name: str) -> None:
    with editing(path) as users:
        if users.pop(name, None) is None:
            raise UsageError(f"no user {name[:80]!r} in {path}; see: waypoint users list")


class UsersFile:
    """The users file as the server reads it: read again whenever it changed (a revoked token
    stops working at once, with no restart)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._hashes: dict[str, str] = {}  # token hash -> user
        try:
            self.refresh()
        except OSError as exc:
            raise ConfigError(
                f"users file {path}: {exc.strerror}; add a user with: waypoint users add NAME"
            ) from None

    def refresh(self) -> None:
        info = os.stat(self.path)  # a missing file is the caller's ConfigError
        seen = (info.st_ino, info.st_mtime_ns, info.st_size)
        with self._lock:
            if seen == self._seen:
                return
            users = read_users(self.path)
            self._hashes = {u.token_sha256: u.name for u in users.values()}
            self._seen = seen

    def user_of(self, token: str) -> str | None:
        """The user whose token this is, or None. Every stored hash is compared, in constant time:
        the time taken says nothing about which hash came close."""
        try:
            self.refresh()
        except (OSError, ConfigError):
            return None  # the file went away or was spoiled: nobody gets in
        given = token_hash(token)
        found = None
        for stored, name in self._hashes.items():
            if hmac.compare_digest(stored, given):
                found = name
        return found

    def __len__(self) -> int:
        return len(self._hashes)
