"""The sandbox launcher: the short program that isolates model-written Python, then runs it.

`sandbox.py` starts this file as a script in a fresh interpreter (`python -I -S`), in its own
session, with an empty environment. It ties its life to the caller's (parent-death signal),
reads its configuration (one JSON line) and the code from stdin, enters new namespaces
(network, PID, mount, IPC, UTS; plus a user namespace when not root), replaces the filesystem
with a minimal root (`_sandbox_rootfs`), then forks the sandbox's PID 1 (`_sandbox_init`),
which starts the program. It stays behind, privileged and outside the namespace, so nothing in
the sandbox can signal or trace it, and reports as JSON lines on the report descriptor what it
enforced, whether the program started (a close-on-exec pipe tells an exec from a setup failure,
so no exit code is ever mistaken for one) and how the sandbox ended. A missing namespace is
recorded rather than fatal (`sandbox.py` warns, or refuses under `require_full_isolation`); a
step that fails once the kernel has granted what it needs is a setup failure, never a weaker
sandbox. Only the standard library is imported here.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sys
import tempfile
from typing import Any

# With -I the script's directory is not on sys.path; the siblings below are stdlib-only too.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _sandbox_init as init
import _sandbox_libc as libc
import _sandbox_rootfs as rootfs
import _sandbox_seccomp as seccomp

SETUP_FAILED = init.SETUP_FAILED
_NAMESPACES = (
    ("network", libc.CLONE_NEWNET),
    ("pid", libc.CLONE_NEWPID),
    ("mount", libc.CLONE_NEWNS),
    ("ipc", libc.CLONE_NEWIPC),
    ("uts", libc.CLONE_NEWUTS),
)
_REQUIRED_FOR_FULL_ISOLATION = (
    "network_namespace",
    "pid_namespace",
    "mount_namespace",
    "filesystem",
    "seccomp",
)


class SetupError(Exception):
    """The sandbox could not be set up as promised; the program must not run."""


def tie_to_caller(caller_pid: int) -> None:
    """Die with the caller: a SIGKILLed caller leaves no launcher (and so no program) behind."""
    libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != caller_pid:  # it died before the line above took effect
        os._exit(SETUP_FAILED)


def enter_namespaces(facts: dict[str, Any]) -> None:
    """Unshare what the kernel allows; the PID namespace applies to the child forked next."""
    if os.geteuid() != 0:
        # Without root, a user namespace is what grants the right to create the others.
        uid, gid = os.geteuid(), os.getegid()
        try:
            libc.unshare(libc.CLONE_NEWUSER)
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
    for name, flag in _NAMESPACES:
        try:
            libc.unshare(flag)
        except OSError as exc:
            facts[f"{name}_namespace"] = f"unavailable: {exc.strerror}"
        else:
            facts[f"{name}_namespace"] = "ok"
    if facts["uts_namespace"] == "ok":
        libc.sethostname("sandbox")  # the host's name is not the code's business


def prepare(config: dict[str, Any], facts: dict[str, Any]) -> tuple[str, list[int]]:
    """Isolate this process as far as the kernel allows; returns the workdir and cgroup fds."""
    enter_namespaces(facts)
    try:
        seccomp.build_filter()
        facts["seccomp"] = "ok"
    except seccomp.FilterUnavailableError as exc:
        facts["seccomp"] = f"unavailable: {exc}"
    # Opened now: the cgroup filesystem is gone once the minimal root replaces the host's.
    join_fds = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in config["cgroup_procs"]]
    if facts["mount_namespace"] == "ok":
        workdir = config["workdir"]
        owner = (config["uid"], config["gid"]) if config["uid"] is not None else None
        try:
            rootfs.build_root(config["rootfs"], workdir, config["disk_bytes"], owner)
        except OSError as exc:
            raise SetupError(f"could not build the sandbox's filesystem: {exc}") from None
        facts["filesystem"] = "ok"
    else:
        workdir = tempfile.mkdtemp(prefix="agentbench-sandbox-")
        facts["filesystem"] = "host"
        facts["host_workdir"] = workdir
        config["env"]["HOME"] = workdir
        if config["uid"] is not None:
            os.chown(workdir, config["uid"], config["gid"])
    missing = [name for name in _REQUIRED_FOR_FULL_ISOLATION if facts.get(name) != "ok"]
    if config["require_full_isolation"] and missing:
        raise SetupError(f"sandbox refused to run: no {', '.join(missing)} here")
    return workdir, join_fds


def _report(fd: int, record: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(record) + "\n").encode())


def _read_until_exec(fd: int) -> str:
    """What the child wrote before it exec'd or died: nothing at all means exec succeeded."""
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _wait(pid: int) -> dict[str, Any]:
    while True:
        try:
            _, status, _ = os.wait4(pid, 0)
        except InterruptedError:
            continue
        break
    if os.WIFSIGNALED(status):
        return {"stage": "init", "signal": os.WTERMSIG(status)}
    return {"stage": "init", "exit_code": os.WEXITSTATUS(status)}


def _report_quietly(fd: int, record: dict[str, Any]) -> None:
    try:
        _report(fd, record)
    except OSError as exc:
        if exc.errno != errno.EPIPE:  # the supervisor stopped listening; nothing to tell
            raise


def main() -> None:
    # The configuration comes on stdin, not in argv: argv is readable by anyone through
    # /proc/PID/cmdline, and the sandbox's init (a fork of this process) shows it as PID 1.
    config = json.loads(sys.stdin.buffer.readline())
    tie_to_caller(config["caller_pid"])
    code = sys.stdin.buffer.read()
    report_fd: int = config["report_fd"]
    facts: dict[str, Any] = {}
    try:
        workdir, joins = prepare(config, facts)
    except (OSError, SetupError) as exc:
        _report(report_fd, {"stage": "launcher", **facts})
        _report(report_fd, {"stage": "failed", "reason": str(exc)})
        sys.exit(SETUP_FAILED)
    _report(report_fd, {"stage": "launcher", **facts})
    try:
        _run_sandbox(config, code, facts, workdir, joins)
    finally:
        if "host_workdir" in facts:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_sandbox(
    config: dict[str, Any], code: bytes, facts: dict[str, Any], workdir: str, joins: list[int]
) -> None:
    report_fd: int = config["report_fd"]
    status_read, status_write = os.pipe2(os.O_CLOEXEC)
    try:
        pid = os.fork()
    except OSError as exc:
        _report(report_fd, {"stage": "failed", "reason": f"could not fork the sandbox: {exc}"})
        return
    if pid == 0:
        os.close(status_read)
        init.run_init(config, code, facts, workdir, joins, status_write)
    os.close(status_write)
    for fd in joins:
        os.close(fd)
    # The supervisor stops a runaway program by killing this pid (PID 1 of the namespace,
    # whose death takes every process in it), so that we reap it and report.
    _report(report_fd, {"stage": "forked", "pid": pid})
    # The launcher's only remaining job is to wait; it must not die of a stray signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    failure = _read_until_exec(status_read)
    if failure:
        _report_quietly(report_fd, {"stage": "failed", "reason": f"setup failed: {failure}"})
    else:
        _report_quietly(report_fd, {"stage": "started"})
    _report_quietly(report_fd, _wait(pid))


if __name__ == "__main__":
    main()
