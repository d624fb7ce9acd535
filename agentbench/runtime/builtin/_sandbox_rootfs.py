"""The sandbox's filesystem: a fresh tmpfs root holding only what the interpreter needs.

In the launcher's private mount namespace, `build_root` mounts an empty tmpfs, binds into it
read-only the interpreter's directories (and nothing else of the host's), adds `/dev` with
`null`, `zero`, `random` and `urandom`, a generated `/etc/passwd`, a size-limited `/tmp`
holding the working directory, and an empty `/proc`; the sandbox's init then mounts its own
proc there and `enter_root` `pivot_root`s into it and detaches the host's tree. The host's
files, sockets (`/run`), stores and mount layout are then not merely read-only but absent. Only
the standard library is imported: this runs in the launcher.
"""

from __future__ import annotations

import os
from typing import Any

try:
    from agentbench.runtime.builtin import _sandbox_libc as libc
except ImportError:  # in the launcher, which imports its siblings as top-level modules
    import _sandbox_libc as libc  # type: ignore[no-redef]

DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
# Any existing directory will do: our mount namespace is private, so the host never sees it.
_STAGING = "/tmp"
PROC = _STAGING + "/proc"  # where init mounts its /proc before `enter_root`
# statvfs flags a read-only remount must keep (inside a user namespace they are locked).
_KEPT_FLAGS = (
    (os.ST_NOSUID, libc.MS_NOSUID),
    (os.ST_NODEV, libc.MS_NODEV),
    (os.ST_NOEXEC, libc.MS_NOEXEC),
    (os.ST_NOATIME, libc.MS_NOATIME),
    (os.ST_NODIRATIME, libc.MS_NODIRATIME),
    (os.ST_RELATIME, libc.MS_RELATIME),
)


def build_root(
    plan: dict[str, Any], workdir: str, disk_bytes: int, owner: tuple[int, int] | None
) -> None:
    """Lay out the minimal root `plan` describes, ready for `enter_root`.

    `plan` holds "binds" (host paths bound read-only at the same place), "symlinks"
    (path → target, recreated as is) and "files" (path → text). `workdir` (under /tmp) is made
    for `owner`. Raises OSError naming the step that failed; nothing reaches the host, since
    every mount here is private to the namespace.
    """
    libc.mount("none", "/", None, libc.MS_REC | libc.MS_PRIVATE, None)
    # Opened before the staging tmpfs can shadow them (an interpreter under /tmp, say).
    sources = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in plan["binds"]}
    sources.update({path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in DEVICES})
    try:
        libc.mount("tmpfs", _STAGING, "tmpfs", libc.MS_NOSUID | libc.MS_NODEV, "size=1m,mode=755")
        for path in plan["binds"]:
            _bind(sources[path], _inside(path), read_only=True)
        for path, target in plan["symlinks"].items():
            _make_parent(_inside(path))
            os.symlink(target, _inside(path))
        for path, text in plan["files"].items():
            _make_parent(_inside(path))
            with open(_inside(path), "w") as f:
                f.write(text)
        _make_dev(sources)
        _make_tmp(workdir, disk_bytes, owner)
        os.mkdir(PROC, 0o555)
    finally:
        for fd in sources.values():
            os.close(fd)


def enter_root() -> None:
    """Make the laid-out root this mount namespace's root, with nothing of the host's left.

    Called by the sandbox's init after it mounted its /proc at `PROC`: inside a user
    namespace the kernel allows a new proc mount only while a full one is still visible.
    """
    # pivot_root(".", ".") stacks the old root under the new one; detaching it leaves nothing
    # of the host reachable or listed in /proc/self/mountinfo.
    os.chdir(_STAGING)
    libc.pivot_root(".", ".")
    libc.umount2(".", libc.MNT_DETACH)
    os.chdir("/")
    _remount_read_only("/")


def _inside(path: str) -> str:
    return _STAGING + path


def _make_parent(target: str) -> None:
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)


def _bind(source_fd: int, target: str, *, read_only: bool) -> None:
    _make_parent(target)
    if os.path.isdir(f"/proc/self/fd/{source_fd}"):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    # Not recursive: a mount below a bound directory stays out of the sandbox.
    libc.mount(f"/proc/self/fd/{source_fd}", target, None, libc.MS_BIND, None)
    if read_only:
        _remount_read_only(target)


def _remount_read_only(target: str) -> None:
    flags = os.statvfs(target).f_flag
    kept = sum(mount_flag for stat_flag, mount_flag in _KEPT_FLAGS if flags & stat_flag)
    libc.mount(
        "none",
        target,
        None,
        libc.MS_REMOUNT | libc.MS_BIND | libc.MS_RDONLY | libc.MS_NOSUID | libc.MS_NODEV | kept,
        None,
    )


def _make_dev(sources: dict[str, int]) -> None:
    dev = _inside("/dev")
    os.mkdir(dev, 0o755)
    libc.mount("tmpfs", dev, "tmpfs", libc.MS_NOSUID | libc.MS_NOEXEC, "size=64k,mode=755")
    for path in DEVICES:
        _bind(sources[path], _inside(path), read_only=False)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("shm", "/tmp/.shm"),  # multiprocessing's semaphores; counted in the /tmp budget
    ):
        os.symlink(target, f"{dev}/{name}")
    _remount_read_only(dev)


def _make_tmp(workdir: str, disk_bytes: int, owner: tuple[int, int] | None) -> None:
    tmp = _inside("/tmp")
    os.mkdir(tmp, 0o755)
    options = f"size={disk_bytes},mode=1777"
    libc.mount("tmpfs", tmp, "tmpfs", libc.MS_NOSUID | libc.MS_NODEV, options)
    os.mkdir(f"{tmp}/.shm", 0o1777)
    os.chmod(f"{tmp}/.shm", 0o1777)  # mkdir's mode is cut by the umask
    os.makedirs(_inside(workdir), mode=0o700, exist_ok=True)
    if owner is not None:
        os.chown(_inside(workdir), *owner)


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def plan_root(prefixes: list[str], user: tuple[str, int, int], home: str) -> dict[str, Any]:
    """What `build_root` puts in the sandbox: the system's program and library directories
    (where the interpreter's shared libraries live), the interpreter's own `prefixes`, the
    dynamic linker's cache, and an `/etc/passwd` naming only root and the sandbox `user`.
    """
    binds: list[str] = []
    symlinks: dict[str, str] = {}
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin
            symlinks[path] = os.readlink(path)
        elif os.path.isdir(path):
            binds.append(path)
    for prefix in map(os.path.realpath, prefixes):
        if not any(prefix == b or prefix.startswith(b + "/") for b in binds):
            binds.append(prefix)
    if os.path.isfile("/etc/ld.so.cache"):
        binds.append("/etc/ld.so.cache")
    name, uid, gid = user
    files = {
        "/etc/passwd": f"root:x:0:0:root:/:/bin/false\n{name}:x:{uid}:{gid}::{home}:/bin/false\n",
        "/etc/group": f"root:x:0:\n{name}:x:{gid}:\n",
        "/etc/hostname": "sandbox\n",
    }
    return {"binds": binds, "symlinks": symlinks, "files": files}
