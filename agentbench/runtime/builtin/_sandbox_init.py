"""Inside the sandbox: its PID 1, and the program that PID 1 starts.

The launcher forks `run_init` as the first process of the new PID namespace. Init replaces the
command line it inherited (the launcher's: host paths) with a neutral one, mounts the
namespace's own `/proc`, enters the minimal root the launcher laid out, forks the program,
reaps orphans as every init must, writes how the program ended (exit code or signal, the CPU
time of the program's own process and of the whole run: what init reaped, and from its /proc
what still runs, which the kernel then kills with the namespace and adds to no one's rusage) to
the report pipe, and exits; the kernel then SIGKILLs whatever the program left behind. The
program is deliberately not PID 1: the kernel shields a namespace's init from every signal it
has no handler for, so as PID 1 the program would never receive RLIMIT_CPU's SIGXCPU (nor a
SIGABRT of its own), and a CPU-limit kill could only be guessed from rusage, which on
some machines reads well below the limit the kernel enforced. `become_program` finishes
isolation in the program's process (cgroups and a cgroup namespace rooted at them, resource
limits, unprivileged user, no_new_privs, parent-death signal, fresh keyrings, the syscall
filter) and execs the interpreter. A failure at any step is written to the close-on-exec status
pipe, which the launcher reads: an empty pipe means the exec happened. Only the standard
library is imported: this runs in the launcher's process tree.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
from typing import Any, NoReturn

try:
    from agentbench.runtime.builtin import _sandbox_cpu as cpu
    from agentbench.runtime.builtin import _sandbox_libc as libc
    from agentbench.runtime.builtin import _sandbox_rootfs as rootfs
    from agentbench.runtime.builtin import _sandbox_seccomp as seccomp
except ImportError:  # in the launcher, which imports its siblings as top-level modules
    import _sandbox_cpu as cpu  # type: ignore[no-redef]
    import _sandbox_libc as libc  # type: ignore[no-redef]
    import _sandbox_rootfs as rootfs  # type: ignore[no-redef]
    import _sandbox_seccomp as seccomp  # type: ignore[no-redef]

SETUP_FAILED = 125  # exit code of a process that could not finish setting up
INIT_TITLE = "sandbox-init"  # what the program sees as PID 1's command line


def run_init(
    config: dict[str, Any],
    code: bytes,
    facts: dict[str, Any],
    workdir: str,
    joins: list[int],
    status_write: int,
) -> NoReturn:
    """PID 1 of the sandbox: start the program, wait for it, report how it ended, exit."""
    try:
        # If the launcher dies, init dies, and with init every process of the namespace.
        libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
        # The program reads our /proc/1/cmdline: it must not show the launcher's argv (the
        # host's interpreter and checkout paths).
        shown = "neutral" if libc.set_process_title(INIT_TITLE) else "the launcher's"
        proc = _mount_proc(facts)
        if facts["filesystem"] == "ok":
            rootfs.enter_root()
        pid = os.fork()
    except BaseException as exc:
        _fail(status_write, exc)
    if pid == 0:
        try:
            become_program(config, code, workdir, joins, {"proc": proc, "init_cmdline": shown})
        except BaseException as exc:  # anything at all: the code must not run half-isolated
            _fail(status_write, exc)
    os.close(status_write)
    for fd in joins:
        os.close(fd)
    ending = _reap_until(pid, own_proc=proc == "private")
    with contextlib.suppress(OSError):  # the supervisor stopped listening: it knows why
        os.write(config["report_fd"], (json.dumps(ending) + "\n").encode())
    os._exit(0)


def _mount_proc(facts: dict[str, Any]) -> str:
    if facts["filesystem"] != "ok":
        return "host"
    if facts["pid_namespace"] != "ok":
        return "none"  # a new /proc here would list the host's processes
    # Host processes (and their command lines) do not exist for the code.
    flags = libc.MS_NOSUID | libc.MS_NODEV | libc.MS_NOEXEC
    libc.mount("proc", rootfs.PROC, "proc", flags, None)
    return "private"


def _fail(status_write: int, exc: BaseException) -> NoReturn:
    os.write(status_write, f"{type(exc).__name__}: {exc}".encode(errors="replace"))
    os._exit(SETUP_FAILED)


def _reap_until(pid: int, *, own_proc: bool) -> dict[str, Any]:
    """Reap every child (orphans are ours as init) until `pid` ends; how it ended.

    `own_proc`: /proc is this PID namespace's, so `pid` and 1 (init) can be read there.
    """
    while True:
        ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        if ended is None or ended.si_pid == pid:
            break
        os.waitpid(ended.si_pid, 0)  # an orphan
    # Read before it is reaped: /proc shows the process's own CPU time apart from its
    # children's, which wait4's rusage adds in.
    own = cpu.own_ticks(pid) if own_proc else None
    _, status, usage = os.wait4(pid, 0)
    ending: dict[str, Any] = {
        "stage": "exit",
        # What RLIMIT_CPU counted; without our /proc, rusage (with its reaped children's).
        "program_cpu_seconds": (
            own / cpu.TICKS if own is not None else usage.ru_utime + usage.ru_stime
        ),
        "run_cpu_seconds": _run_cpu_seconds(own_proc),
        "max_rss_kb": usage.ru_maxrss,
    }
    if os.WIFSIGNALED(status):
        ending["signal"] = os.WTERMSIG(status)
    else:
        ending["exit_code"] = os.WEXITSTATUS(status)
    return ending


def _run_cpu_seconds(own_proc: bool) -> float:
    """The run's CPU time by now: what init reaped (the program and its reaped tree, orphans)
    and, from /proc, every process still running, with what each of them reaped."""
    ticks = cpu.run_ticks(1) if own_proc else None
    if ticks is not None:
        return ticks / cpu.TICKS
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return reaped.ru_utime + reaped.ru_stime


def set_limits(config: dict[str, Any]) -> None:
    cpu = config["cpu_seconds"]
    limits = [
        # SIGXCPU at the limit says exactly why the program ended; a program that catches it
        # gets SIGKILL a second later.
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_FSIZE, config["file_bytes"], config["file_bytes"]),
        (resource.RLIMIT_NOFILE, config["max_open_files"], config["max_open_files"]),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if not config["memory_cgroup"]:
        # Only the fallback: an allocation RLIMIT_AS refuses leaves no trace the kernel
        # reports, where the cgroup's OOM kill is counted.
        limits.append((resource.RLIMIT_AS, config["memory_bytes"], config["memory_bytes"]))
    if not config["pids_cgroup"]:
        # Per uid, so shared by every sandbox of that user: only the fallback.
        limits.append((resource.RLIMIT_NPROC, config["max_processes"], config["max_processes"]))
    for limit, soft, hard in limits:
        resource.setrlimit(limit, (soft, hard))


def become_program(
    config: dict[str, Any], code: bytes, workdir: str, joins: list[int], facts: dict[str, Any]
) -> NoReturn:
    """In the program's process: finish isolation, drop privileges, exec the code."""
    for fd in joins:
        os.write(fd, b"0")  # "0" is the writer: this process, before anything it starts
        os.close(fd)
    facts["cgroup_namespace"] = _own_cgroup_root()
    set_limits(config)
    os.chdir(workdir)
    if config["uid"] is not None:
        os.setgroups([])
        os.setgid(config["gid"])
        os.setuid(config["uid"])
    facts["uid"] = os.getuid()
    libc.prctl(libc.PR_SET_NO_NEW_PRIVS, 1)  # setuid binaries cannot raise privileges
    # Set after the uid change, which clears it.
    libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    facts["keyring"] = _fresh_keyrings()
    try:
        seccomp.install()
        facts["seccomp"] = "ok"
    except (OSError, seccomp.FilterUnavailableError) as exc:
        facts["seccomp"] = f"unavailable: {exc}"
        if config["require_full_isolation"]:
            raise
    fd = os.open("main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(code)
    os.write(config["report_fd"], (json.dumps({"stage": "child", **facts}) + "\n").encode())
    os.close(config["report_fd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    python = config["python"]
    os.execve(python, [python, "-I", "-B", "-u", "-X", "utf8", "main.py"], config["env"])


def _own_cgroup_root() -> str:
    """Make the run's cgroups the root of what the program sees in /proc/self/cgroup.

    Their host paths name the caller's cgroup and pid; where the kernel has no cgroup
    namespace the program sees them (the syscall filter still keeps it from moving).
    """
    try:
        libc.unshare(libc.CLONE_NEWCGROUP)
    except OSError as exc:
        return f"unavailable: {exc.strerror}"
    return "ok"


def _fresh_keyrings() -> str:
    """A new session keyring, and an empty user keyring: nothing a previous run stored.

    The syscall filter already denies keyrings to the code; this is what still holds where
    the filter is unavailable.
    """
    try:
        libc.keyctl(libc.KEYCTL_JOIN_SESSION_KEYRING, 0)
        libc.keyctl(libc.KEYCTL_CLEAR, libc.KEY_SPEC_USER_KEYRING)
    except OSError as exc:
        return f"unchanged: {exc}"
    return "fresh"
