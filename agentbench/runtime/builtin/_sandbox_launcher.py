"""The sandbox launcher: the short program that isolates model-written Python, then runs it.

`sandbox.py` starts this file as a script in a fresh interpreter (`python -I -S`), in its own
session, with a minimal environment. It reads the code from stdin, enters new namespaces
(network, PID, mount, IPC; plus a user namespace when not root), makes the host filesystem
read-only and gives the code a private size-limited `/tmp`, then forks the child that sets
resource limits, drops to an unprivileged user, and execs the interpreter on the code. It stays
behind as the child's parent (still privileged, so the child cannot signal or trace it) and
reports, as JSON lines on the report descriptor, what it enforced and how the child ended.
Every step that the kernel refuses is recorded rather than fatal; `sandbox.py` decides what to
tell the model. Only the standard library is imported here: this runs before any isolation.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
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
MS_STRICTATIME = 0x1000000

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

SETUP_FAILED = 125  # exit code of a child that could not finish setting up (as in `env`/`nice`)

# Remounting a mount read-only must repeat the flags it already has, or a user-namespaced
# remount is refused (those flags are locked); these are the ones mountinfo spells out.
_MOUNT_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
_REQUIRED_FOR_FULL_ISOLATION = ("network_namespace", "pid_namespace", "mount_namespace")
# World-writable places that get a private view backed by the sandbox's own /tmp.
_SCRATCH_DIRS = ("/var/tmp", "/dev/shm", "/run/lock")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
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


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def enter_namespaces(facts: dict[str, Any]) -> None:
    """Unshare what the kernel allows; the PID namespace applies to the child forked next."""
    as_root = os.geteuid() == 0
    if not as_root:
        # Without root, a user namespace is what grants the right to create the others.
        uid, gid = os.geteuid(), os.getegid()
        try:
            _unshare(CLONE_NEWUSER)
        except OSError as exc:
            facts["user_namespace"] = f"unavailable: {exc.strerror}"
        else:
            facts["user_namespace"] = "ok"
            # Map one unprivileged id (not 0) to ourselves: the child keeps no capabilities
            # after exec, and files it creates belong to us outside.
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"1000 {uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"1000 {gid} 1")
    for name, flag in (
        ("network", CLONE_NEWNET),
        ("pid", CLONE_NEWPID),
        ("mount", CLONE_NEWNS),
        ("ipc", CLONE_NEWIPC),
    ):
        try:
            _unshare(flag)
        except OSError as exc:
            facts[f"{name}_namespace"] = f"unavailable: {exc.strerror}"
        else:
            facts[f"{name}_namespace"] = "ok"


def isolate_filesystem(config: dict[str, Any], owner: tuple[int, int]) -> list[str]:
    """Make every host mount read-only, hide home directories, give /tmp a private tmpfs.

    Returns the mount points that could not be made read-only.
    """
    workdir: str = config["workdir"]
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)  # nothing we do leaks to the host
    still_writable = []
    for mount_point, options in _host_mounts():
        if "ro" in options:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        flags |= sum(_MOUNT_FLAGS[o] for o in options if o in _MOUNT_FLAGS)
        try:
            _mount("none", mount_point, None, flags, None)
        except OSError:
            still_writable.append(mount_point)
    for hidden in config["hidden_paths"]:
        # An empty read-only tmpfs over it: ~/.ssh, shell history, cloud credentials vanish.
        _mount("tmpfs", hidden, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=755")
    tmpfs_options = f"size={config['disk_bytes']},mode=1777"
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options)
    for directory in _SCRATCH_DIRS:
        if os.path.isdir(directory) and not os.path.islink(directory):
            backing = "/tmp/." + directory.strip("/").replace("/", "-")
            os.mkdir(backing, 0o1777)
            os.chmod(backing, 0o1777)  # mkdir's mode is cut by the umask
            _mount(backing, directory, None, MS_BIND, None)
    os.makedirs(workdir, exist_ok=True)
    if not workdir.startswith("/tmp/"):
        _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options)
    os.chown(workdir, *owner)
    os.chmod(workdir, 0o700)
    return still_writable


def _host_mounts() -> list[tuple[str, set[str]]]:
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            # mountinfo escapes spaces in paths as \040
            mount_point = fields[4].replace("\\040", " ")
            mounts.append((mount_point, set(fields[5].split(","))))
    return mounts


def set_limits(config: dict[str, Any]) -> None:
    # Soft = hard, so the limit is a SIGKILL: as PID 1 of its namespace the program would
    # never receive the soft limit's SIGXCPU (init ignores signals it has no handler for).
    for limit, key in (
        (resource.RLIMIT_CPU, "cpu_seconds"),
        (resource.RLIMIT_AS, "memory_bytes"),
        (resource.RLIMIT_FSIZE, "file_bytes"),
        (resource.RLIMIT_NPROC, "max_processes"),
        (resource.RLIMIT_NOFILE, "max_open_files"),
    ):
        resource.setrlimit(limit, (config[key], config[key]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def become_sandbox(config: dict[str, Any], code: bytes, namespaces: dict[str, Any]) -> None:
    """In the forked child: finish isolation, drop privileges, exec the code. Never returns."""
    report_fd: int = config["report_fd"]
    facts: dict[str, Any] = {}
    if namespaces.get("pid_namespace") == "ok" and namespaces.get("mount_namespace") == "ok":
        try:
            # A /proc of the new PID namespace: host processes (and their command lines)
            # become invisible to the code.
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            facts["proc"] = "private"
        except OSError as exc:
            facts["proc"] = f"host ({exc.strerror})"
    set_limits(config)
    os.chdir(config["workdir"])
    if config["uid"] is not None:
        os.setgroups([])
        os.setgid(config["gid"])
        os.setuid(config["uid"])
    facts["uid"] = os.getuid()
    _prctl(PR_SET_NO_NEW_PRIVS, 1)  # setuid binaries (su, sudo, ping) cannot raise privileges
    # Set after the uid change, which clears it: if the launcher dies, so does the child, and
    # with it the whole PID namespace.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    fd = os.open("main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(code)
    _report(report_fd, {"stage": "child", **facts})
    os.close(report_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    python = config["python"]
    os.execve(python, [python, "-I", "-B", "-u", "-X", "utf8", "main.py"], config["env"])


def _report(fd: int, record: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(record) + "\n").encode())


def _wait(pid: int) -> dict[str, Any]:
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
        except InterruptedError:
            continue
        break
    outcome: dict[str, Any] = {"stage": "exit", "cpu_seconds": usage.ru_utime + usage.ru_stime}
    if os.WIFSIGNALED(status):
        outcome["signal"] = os.WTERMSIG(status)
    else:
        outcome["exit_code"] = os.WEXITSTATUS(status)
    return outcome


def main() -> None:
    config = json.loads(sys.argv[1])
    code = sys.stdin.buffer.read()
    report_fd: int = config["report_fd"]
    facts: dict[str, Any] = {}
    enter_namespaces(facts)
    facts["filesystem"] = "host"
    if facts.get("mount_namespace") == "ok":
        owner = (config["uid"], config["gid"]) if config["uid"] is not None else (-1, -1)
        try:
            still_writable = isolate_filesystem(config, owner)
        except OSError as exc:
            facts["filesystem"] = f"host ({exc.strerror})"
        else:
            facts["filesystem"] = "read-only host, private /tmp"
            facts["hidden"] = config["hidden_paths"]
            if still_writable:
                facts["still_writable"] = still_writable
    _report(report_fd, {"stage": "launcher", **facts})
    missing = [name for name in _REQUIRED_FOR_FULL_ISOLATION if facts.get(name) != "ok"]
    if config["require_full_isolation"] and missing:
        os.write(2, f"sandbox refused to run: no {', '.join(missing)} here\n".encode())
        sys.exit(SETUP_FAILED)
    pid = os.fork()
    if pid == 0:
        try:
            become_sandbox(config, code, facts)
        except BaseException as exc:  # anything at all: the child must not run on unisolated
            message = f"sandbox setup failed: {type(exc).__name__}: {exc}\n"
            os.write(2, message.encode(errors="replace"))
        os._exit(SETUP_FAILED)
    # The supervisor stops a runaway program by killing this pid, so that we reap it.
    _report(report_fd, {"stage": "forked", "pid": pid})
    # The launcher's only remaining job is to wait; it must not die of a stray signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    outcome = _wait(pid)
    try:
        _report(report_fd, outcome)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise


if __name__ == "__main__":
    main()
