"""The few Linux system calls the sandbox launcher makes, as thin ctypes wrappers.

Python's standard library has no `unshare`, `mount`, `pivot_root` or `prctl`; these wrappers
raise `OSError` naming the call, so the launcher can report exactly which step the kernel
refused. Only the standard library is imported: this runs in the launcher before isolation.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
MNT_DETACH = 0x2

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2

KEYCTL_JOIN_SESSION_KEYRING = 1
KEYCTL_CLEAR = 7
KEY_SPEC_USER_KEYRING = -4

# glibc has no pivot_root() and no keyctl(); their numbers per architecture (uname -m).
_SYSCALLS = {
    "x86_64": {"pivot_root": 155, "keyctl": 250},
    "aarch64": {"pivot_root": 41, "keyctl": 219},
    "riscv64": {"pivot_root": 41, "keyctl": 219},
}

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def syscall_number(name: str) -> int:
    machine = os.uname().machine
    try:
        return _SYSCALLS[machine][name]
    except KeyError:
        raise OSError(0, f"{name}: syscall number unknown on {machine}") from None


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    number = syscall_number("pivot_root")
    _check(_libc.syscall(number, new_root.encode(), put_old.encode()), "pivot_root")


def sethostname(name: str) -> None:
    _check(_libc.sethostname(name.encode(), len(name)), "sethostname")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def set_process_title(title: str) -> bool:
    """Make /proc/self/cmdline and comm say `title` instead of our argv; False if unchanged.

    The kernel shows cmdline from the memory exec copied argv into, so overwriting that memory
    (as setproctitle does) changes it with no privilege; PR_SET_MM could move the bounds too,
    but needs CAP_SYS_RESOURCE in the host's user namespace. The interpreter keeps copies of
    its arguments, so nothing reads this memory again.
    """
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: fields 48 and 49
    if not 0 < start < end:
        return False
    raw = title.encode()[: end - start - 1]
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, raw, len(raw))
    _check(_libc.prctl(PR_SET_NAME, ctypes.c_char_p(raw[:15]), 0, 0, 0), "prctl")
    return True


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_filter(program: bytes) -> None:
    """Install a classic-BPF seccomp program (packed `struct sock_filter`s, 8 bytes each)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    pointer = ctypes.c_void_p(ctypes.addressof(fprog))
    _check(
        _libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), pointer, 0, 0),
        "seccomp",
    )


def keyctl(operation: int, argument: int) -> None:
    number = syscall_number("keyctl")
    _check(_libc.syscall(number, operation, ctypes.c_long(argument)), "keyctl")
