"""The sandbox's syscall filter: a classic-BPF seccomp program assembled with `struct`.

Sandboxed code never needs keyrings, ptrace, mounts, BPF, userfaultfd, perf events, io_uring,
kexec, kernel modules or new namespaces; each of those is either state shared with the host
(the user keyring outlives a run) or kernel attack surface. The filter makes them fail with
EPERM, which Python reports as an ordinary `PermissionError`. A socket may only be a Unix one
(what `multiprocessing`, `asyncio` and `socketpair` use): any other family fails with
EAFNOSUPPORT, as on a kernel built without it — the network namespace leaves no interface to
reach, but vsock talks to the hypervisor whatever the namespace, netlink, packet and `AF_ALG`
are kernel attack surface, and where the machine gives no network namespace the filter is what
keeps the code off the network. `clone3` fails with ENOSYS
instead (its flags live in memory a filter cannot read), so the C library falls back to
`clone`, whose namespace flags the filter can check. A call from another ABI (32-bit syscalls
on x86_64, x32) is refused outright, since its numbers would mean different calls. Only the
standard library is imported: this runs in the launcher.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

try:
    from agentbench.runtime.builtin import _sandbox_libc as libc
except ImportError:  # in the launcher, which imports its siblings as top-level modules
    import _sandbox_libc as libc  # type: ignore[no-redef]

# <linux/audit.h>: the architecture a syscall was made through.
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "riscv64": 0xC00000F3}
_X32_SYSCALL_BIT = 0x40000000

DENIED = (
    "add_key", "request_key", "keyctl",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    "unshare", "setns",
    "bpf", "userfaultfd", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "acct", "swapon", "swapoff", "reboot",
    "syslog", "quotactl", "fanotify_init",
)  # fmt: skip

# x86_64 from <asm/unistd_64.h>; aarch64 and riscv64 share <asm-generic/unistd.h>.
_X86_64 = {
    "add_key": 248, "request_key": 249, "keyctl": 250, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "mount": 165,
    "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "unshare": 272, "setns": 308, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "open_by_handle_at": 304, "name_to_handle_at": 303, "acct": 163,
    "swapon": 167, "swapoff": 168, "reboot": 169, "syslog": 103, "quotactl": 179,
    "fanotify_init": 300, "clone": 56, "clone3": 435, "socket": 41, "socketpair": 53,
}  # fmt: skip
_GENERIC = {
    "add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117,
    "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "mount": 40,
    "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "unshare": 97, "setns": 268, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
    "delete_module": 106, "open_by_handle_at": 265, "name_to_handle_at": 264, "acct": 89,
    "swapon": 224, "swapoff": 225, "reboot": 142, "syslog": 116, "quotactl": 60,
    "fanotify_init": 262, "clone": 220, "clone3": 435, "socket": 198, "socketpair": 199,
}  # fmt: skip
_NUMBERS = {"x86_64": _X86_64, "aarch64": _GENERIC, "riscv64": _GENERIC}
ALLOWED_SOCKET_FAMILIES = (socket.AF_UNIX,)

_NEW_NAMESPACE_FLAGS = (
    libc.CLONE_NEWNS | libc.CLONE_NEWCGROUP | libc.CLONE_NEWUTS | libc.CLONE_NEWIPC
    | libc.CLONE_NEWUSER | libc.CLONE_NEWPID | libc.CLONE_NEWNET
)  # fmt: skip

# <linux/filter.h> and <linux/seccomp.h>
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0 = 0, 4, 16  # in struct seccomp_data


class FilterUnavailableError(Exception):
    """This machine's architecture has no syscall table here."""


def build_filter(machine: str | None = None) -> bytes:
    """The packed BPF program for `machine` (default: this one)."""
    machine = machine or os.uname().machine
    if machine not in _NUMBERS:
        raise FilterUnavailableError(f"no syscall table for {machine}")
    numbers = _NUMBERS[machine]
    # Instructions as (code, jump-if-true label, jump-if-false label, k); labels resolve below.
    program: list[tuple[int, str | None, str | None, int]] = [
        (_LD_W_ABS, None, None, _OFFSET_ARCH),
        (_JEQ_K, None, "deny", _AUDIT_ARCH[machine]),
        (_LD_W_ABS, None, None, _OFFSET_NR),
    ]
    if machine == "x86_64":
        program.append((_JGE_K, "deny", None, _X32_SYSCALL_BIT))
    program += [(_JEQ_K, "deny", None, numbers[name]) for name in DENIED]
    program += [
        (_JEQ_K, "clone", None, numbers["clone"]),
        (_JEQ_K, "enosys", None, numbers["clone3"]),
        (_JEQ_K, "socket", None, numbers["socket"]),
        (_JEQ_K, "socket", None, numbers["socketpair"]),
        (_RET_K, None, None, _RET_ALLOW),
    ]
    labels = {"clone": len(program)}
    # clone's flags are its first argument; the low 32 bits are at offset 16 on little-endian.
    program += [
        (_LD_W_ABS, None, None, _OFFSET_ARG0),
        (_JSET_K, "deny", None, _NEW_NAMESPACE_FLAGS),
        (_RET_K, None, None, _RET_ALLOW),
    ]
    labels["socket"] = len(program)
    # The family is an int: the kernel reads only the low 32 bits of the register.
    program.append((_LD_W_ABS, None, None, _OFFSET_ARG0))
    program += [(_JEQ_K, "allow", None, family) for family in ALLOWED_SOCKET_FAMILIES]
    program.append((_RET_K, None, None, _RET_ERRNO | errno.EAFNOSUPPORT))
    labels["allow"] = len(program)
    program.append((_RET_K, None, None, _RET_ALLOW))
    labels["deny"] = len(program)
    program.append((_RET_K, None, None, _RET_ERRNO | errno.EPERM))
    labels["enosys"] = len(program)
    program.append((_RET_K, None, None, _RET_ERRNO | errno.ENOSYS))

    packed = bytearray()
    for index, (code, if_true, if_false, k) in enumerate(program):
        # A jump counts the instructions it skips after the next one.
        jt = labels[if_true] - index - 1 if if_true else 0
        jf = labels[if_false] - index - 1 if if_false else 0
        packed += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(packed)


def install(machine: str | None = None) -> None:
    """Filter every later syscall of this process and its children; needs no_new_privs."""
    libc.seccomp_filter(build_filter(machine))
