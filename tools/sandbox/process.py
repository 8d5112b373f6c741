"""The host side of a running sandbox: its pipes read into capped buffers until they close, the wall
clock and output caps enforced, and the whole PID namespace killed."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path
from typing import IO

from tools.sandbox.limits import Limit

# After the user code's process exits, everything left in the namespace dies with its init; this is
# only how long to wait for the pipes to close before giving up on them.
DRAIN_SECONDS = 5.0


class Stream:
    """One pipe from the sandbox, read into a buffer that keeps at most ``cap`` bytes."""

    def __init__(self, fd: int, cap: int, *, kill_on_overflow: bool = False) -> None:
        self.fd = fd
        self.cap = cap
        self.kill_on_overflow = kill_on_overflow
        self.data = bytearray()
        self.overflow = False

    def add(self, chunk: bytes) -> bool:
        """Keep what fits; return True the first time the stream goes over its cap."""
        room = self.cap - len(self.data)
        self.data += chunk[: max(0, room)]
        if len(chunk) <= room or self.overflow:
            return False
        self.overflow = True
        return True

    def text(self, *, truncated_marker: bool = False) -> str:
        text = bytes(self.data).decode("utf-8", errors="replace")
        if self.overflow and truncated_marker:
            text += f"\n[truncated: output exceeded {self.cap} bytes; the rest was discarded]"
        return text


def pump(
    proc: subprocess.Popen, code: bytes, streams: dict[str, Stream], deadline: float
) -> Limit | None:
    """Feed the program to stdin and read every stream until all are closed; kill the sandbox at the
    deadline or when stdout or stderr passes its cap, and return which of those happened."""
    assert proc.stdin
    pending = memoryview(code)
    sel = selectors.DefaultSelector()
    stdin_fd = proc.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    sel.register(stdin_fd, selectors.EVENT_WRITE, None)
    for stream in streams.values():
        sel.register(stream.fd, selectors.EVENT_READ, stream)
    killed_for: Limit | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                if killed_for is not None:
                    break  # the namespace is dead; something outside it holds a pipe open
                killed_for = "wall"
                kill_sandbox(proc)
                deadline = now + DRAIN_SECONDS
            for key, _ in sel.select(deadline - now):
                if key.data is None:
                    pending = _feed(sel, proc.stdin, pending)
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                elif key.data.add(chunk) and key.data.kill_on_overflow and killed_for is None:
                    killed_for = "output"
                    kill_sandbox(proc)
                    deadline = time.monotonic() + DRAIN_SECONDS
    finally:
        sel.close()
        proc.stdin.close()
    return killed_for


def _feed(sel: selectors.BaseSelector, stdin: IO[bytes], pending: memoryview) -> memoryview:
    try:
        written = os.write(stdin.fileno(), pending[:65536])
    except BlockingIOError:
        return pending
    except BrokenPipeError:  # the sandbox died before reading its program
        written = len(pending)
    pending = pending[written:]
    if not pending:
        sel.unregister(stdin.fileno())
        stdin.close()
    return pending


def kill_sandbox(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's PID 1 (the kernel then kills every process in its PID namespace, daemons
    included); unshare, its parent, reaps it and exits. Killing unshare first would orphan PID 1."""
    init_pids = _children(proc.pid)
    for pid in init_pids:
        _signal(pid, signal.SIGKILL)
    if not init_pids:  # not forked yet: unshare's --kill-child takes PID 1 down with it
        _signal(proc.pid, signal.SIGKILL)


def reap(proc: subprocess.Popen) -> None:
    try:
        proc.wait(timeout=DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        kill_sandbox(proc)
        _signal(proc.pid, signal.SIGKILL)
        proc.wait()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:  # kernel without CONFIG_PROC_CHILDREN: scan every process's parent
        pass
    children = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        # The command name may contain spaces and parentheses; the fields after it do not.
        if stat.rsplit(")", 1)[-1].split()[1] == str(pid):
            children.append(int(entry.name))
    return children


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)
