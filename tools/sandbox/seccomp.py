"""The seccomp filter PID 1 installs before any user code runs: the keyring syscalls (keyctl,
add_key, request_key) fail with EPERM, and a syscall made through another ABI (i386 or arm32 on a
64-bit kernel, x32) never reaches the kernel. Built here as bytes; PID 1 only loads them."""

from __future__ import annotations

import errno
import os
import struct

from tools.sandbox.outcome import SandboxSetupError

# `uname -m` → (AUDIT_ARCH_* of the native 64-bit ABI, the keyring syscalls' numbers there).
KEYRING_SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {"add_key": 248, "request_key": 249, "keyctl": 250}),
    "aarch64": (0xC00000B7, {"add_key": 217, "request_key": 218, "keyctl": 219}),
}
_X32_SYSCALL_BIT = 0x40000000

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # in struct seccomp_data


def keyring_syscalls(machine: str | None = None) -> dict[str, int]:
    """The keyring syscalls' numbers on ``machine`` (default: this one's `uname -m`)."""
    return _arch(machine)[1]


def keyring_filter(machine: str | None = None, error: int = errno.EPERM) -> bytes:
    """A seccomp program (an array of struct sock_filter) that makes keyctl, add_key and
    request_key fail with ``error`` and kills a process that makes a syscall of another ABI.

    Raises SandboxSetupError on a machine whose syscall numbers are not known here.
    """
    audit_arch, numbers = _arch(machine)
    blocked = sorted(numbers.values())
    deny = len(blocked) + 1  # jumps are relative to the next instruction; see `program` below
    program = [
        (_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        (_JEQ_K, 1, 0, audit_arch),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _NR_OFFSET),
        # x32 shares AUDIT_ARCH_X86_64 and numbers its calls from this bit: refuse them all.
        (_JGE_K, deny, 0, _X32_SYSCALL_BIT),
        *((_JEQ_K, deny - 1 - i, 0, number) for i, number in enumerate(blocked)),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, _RET_ERRNO | error),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


def _arch(machine: str | None) -> tuple[int, dict[str, int]]:
    machine = machine or os.uname().machine
    try:
        return KEYRING_SYSCALLS[machine]
    except KeyError:
        raise SandboxSetupError(
            f"the keyring cannot be isolated on {machine}: its syscall numbers are unknown"
        ) from None
