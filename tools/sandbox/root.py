"""The sandbox's root filesystem: what it shows (RootPlan, plan_root) and the shell script that
builds it inside the new mount namespace, pivots into it and makes it read-only (setup_script)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tools.sandbox.limits import KIB

# The sandbox's /etc holds copies of these small, world-readable files and nothing else.
_ETC_FILES = ("passwd", "group", "nsswitch.conf", "hosts", "host.conf")
_ETC_MAX_BYTES = 64 * KIB
_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_STDIO = ("stdin", "stdout", "stderr")
_DEVICES = ("null", "zero", "full", "random", "urandom")
_KEY_LISTS = ("keys", "key-users")  # in /proc

# Mount options of the empty read-only tmpfs laid over a directory that must stay hidden.
_HIDDEN_OPTIONS = "ro,size=4k,nr_inodes=8,mode=0755,nosuid,nodev,noexec"


@dataclass
class RootPlan:
    """What the sandbox's root contains: directories, symlinks and small file copies on a tmpfs,
    read-only binds of host directories, device nodes, and empty tmpfs over hidden directories."""

    dirs: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (target, path in the root)
    files: list[tuple[str, str]] = field(default_factory=list)  # (path in the root, text)
    binds: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)


def hidden_dirs(hide: Iterable[Path]) -> list[Path]:
    """``hide`` plus the caller's working directory and home (the workspace and DB live there)."""
    dirs = list(hide)
    for current in (Path.cwd, Path.home):
        try:
            dirs.append(current())
        except (OSError, RuntimeError):  # deleted cwd, no home
            continue
    return dirs


def plan_root(python: Path, hidden: Iterable[Path]) -> RootPlan:
    """Only /usr (and /bin, /lib... when they are not symlinks into it), the interpreter's prefix,
    copies of a few /etc files and five devices are visible; ``hidden`` directories inside those are
    covered. ``python`` must be a resolved path."""
    plan = RootPlan(dirs=["usr", "etc", "dev", "proc", "tmp"], binds=["/usr"])
    for name in _TOP_LEVEL:
        path = Path("/", name)
        if path.is_symlink():
            plan.links.append((os.readlink(path), name))
        elif path.is_dir():
            plan.dirs.append(name)
            plan.binds.append(str(path))
    if not inside_any(python, plan.binds):
        prefix = python.parent.parent
        plan.dirs.append(str(prefix).lstrip("/"))
        plan.binds.append(str(prefix))
    _plan_etc(plan)
    plan.devices = [f"/dev/{name}" for name in _DEVICES if Path("/dev", name).exists()]
    plan.links += [("/proc/self/fd", "dev/fd"), ("/tmp", "dev/shm")]
    plan.links += [(f"/proc/self/fd/{n}", f"dev/{name}") for n, name in enumerate(_STDIO)]
    for path in hidden:
        path = path.resolve()
        if path.is_dir() and inside_any(path, plan.binds):
            plan.hidden.append(str(path))
    return plan


def inside_any(path: Path, roots: list[str]) -> bool:
    return any(path == Path(root) or Path(root) in path.parents for root in roots)


def _plan_etc(plan: RootPlan) -> None:
    etc = Path("/etc")
    localtime = etc / "localtime"
    if localtime.is_symlink():
        plan.links.append((os.readlink(localtime), "etc/localtime"))
    sources = [etc / name for name in _ETC_FILES]
    # Debian's python3 imports sitecustomize from /etc/python3.X; without it every run warns.
    for sub in sorted(etc.glob("python3*")):
        if sub.is_dir() and not sub.is_symlink():
            plan.dirs.append(f"etc/{sub.name}")
            sources += sorted(sub.iterdir())
    for source in sources:
        text = _small_text(source)
        if text is not None:
            plan.files.append((str(source).lstrip("/"), text))


def _small_text(source: Path) -> str | None:
    try:
        if source.is_symlink() or not source.is_file() or source.stat().st_size > _ETC_MAX_BYTES:
            return None
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return None if "\x00" in text else text


def setup_script(plan: RootPlan, tmp_options: str) -> str:
    """The shell script PID 1 runs as root of the new user namespace (host uid nobody): build the
    root on a tmpfs over /tmp, pivot into it, drop the old root, make it read-only, exec "$@"."""
    q = shlex.quote
    lines = [
        "set -eu",
        "mount -t tmpfs -o size=2m,nr_inodes=2048,mode=0755 waypoint-root /tmp",
        "cd /tmp",
        "mkdir -p " + " ".join(q(d) for d in plan.dirs),
    ]
    # `ln -s T1 T2 DIR` names each link after its target, so most links take one exec per directory.
    batched: dict[str, list[str]] = {}
    for target, path in plan.links:
        directory, _, name = path.rpartition("/")
        if name == Path(target).name:
            batched.setdefault(directory or ".", []).append(target)
        else:
            lines.append(f"ln -s {q(target)} {q(path)}")
    for directory, targets in batched.items():
        lines.append(f"ln -s {' '.join(q(t) for t in targets)} {q(directory)}/")
    lines += [f"printf %s {q(text)} > {q(path)}" for path, text in plan.files]
    for source in plan.binds:
        target = q("." + source)
        lines.append(f"mount --bind {q(source)} {target}")
        lines.append(f"mount -o remount,bind,ro,nosuid,nodev {target}")
    for device in plan.devices:
        lines.append(f": > {q('.' + device)}; mount --bind {q(device)} {q('.' + device)}")
    lines += [
        f"mount -t tmpfs -o {_HIDDEN_OPTIONS} waypoint-hidden {q('.' + p)}" for p in plan.hidden
    ]
    lines += [
        f"mount -t tmpfs -o {q(tmp_options)} waypoint-tmp tmp",
        # Without a proc of its own (some containers forbid it) the sandbox simply has no /proc.
        "mount -t proc -o nosuid,nodev,noexec proc proc 2>/dev/null || true",
        # The kernel lists every key the uid may view in these, host keys included: show nothing.
        *(f"if [ -e proc/{n} ]; then mount --bind /dev/null proc/{n}; fi" for n in _KEY_LISTS),
        # pivot_root(2)'s "new_root == put_old" idiom: the old root lands on top and is detached.
        "pivot_root . .",
        "umount -l .",
        "cd /",
        "mount -o remount,bind,ro,nosuid,nodev /",
        # The user code's own user namespace is the one allowed below this one; no more nesting.
        "if [ -e /proc/sys/user ]; then echo 1 > /proc/sys/user/max_user_namespaces; fi",
        "cd /tmp",
        'exec "$@"',
    ]
    return "\n".join(lines) + "\n"
