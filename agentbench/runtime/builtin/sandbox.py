"""The `python_sandbox` tool: model-written Python run in an isolated process, never in ours.

`run_python` writes nothing into the host interpreter: it makes the run's cgroups
(`_sandbox_cgroup`: one process and one memory budget for the whole tree), plans the minimal
filesystem (`_sandbox_rootfs`), and starts `_sandbox_launcher.py` (namespaces, the minimal
root, the sandbox's init and program: limits, an unprivileged user, the syscall filter)
through `_sandbox_process` (the supervision: the time limits on `_sandbox_clock`, output
caps, killing the process group). `_sandbox_outcome` then reads how the program ended from
what the kernel reported (signal, rusage, the cgroup's counters) into a `SandboxResult`.
`python_sandbox()` wraps that as an agentbench `Tool`. Whatever this machine cannot enforce is
listed in `SandboxResult.warnings`, and the model sees those warnings too, so nobody mistakes a
partial sandbox for a full one.

The limits measure the program, not the machine, so a loaded machine cannot turn a program
that passed into one that timed out: the sandbox's start never counts against `timeout_s`
(it has a bound of its own), `timeout_s` counts the program's wall-clock time less the time
the machine held it back (waits for CPUs others were using, not those its own processes cause
each other), `cpu_seconds` is CPU time, and only `wall_timeout_s`, a much longer backstop, is
plain wall clock.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from agentbench.errors import UsageError
from agentbench.runtime.builtin._sandbox_cgroup import RunCgroup
from agentbench.runtime.builtin._sandbox_clock import START_TIMEOUT_S, ProgramClock
from agentbench.runtime.builtin._sandbox_cpu import CpuQuotaWatch
from agentbench.runtime.builtin._sandbox_limits import MB as _MB
from agentbench.runtime.builtin._sandbox_limits import SandboxLimits
from agentbench.runtime.builtin._sandbox_outcome import SandboxOutcome, SandboxResult, interpret
from agentbench.runtime.builtin._sandbox_process import start_and_watch
from agentbench.runtime.builtin._sandbox_rootfs import plan_root
from agentbench.runtime.tools import Effect, Tool, ToolResult

_WORKDIR = "/tmp/work"  # inside the sandbox's private /tmp; the same path every run
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
# Budgets whose cgroup `require_full_isolation` insists on; the CPU quota's watch still holds.
_FULL_ISOLATION_BUDGETS = ("memory", "pids")


def run_python(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run `code` as a Python program in a sandbox and report how it ended. Never raises."""
    limits = limits or SandboxLimits()
    refused = _refuse_code(code)
    if refused is not None:
        return refused
    try:
        uid, gid = _sandbox_ids(limits.user)
        # The real file: a venv's symlink would pull in the venv, which the sandbox lacks.
        python = os.path.realpath(_pick_interpreter(limits.python, sandbox_uid=uid))
        prefixes = [*_prefixes(python), os.path.dirname(python)]
        plan = plan_root(prefixes, _passwd_entry(limits.user, uid, gid), _WORKDIR)
    except UsageError as exc:
        return SandboxResult(outcome=SandboxOutcome.FAILED_TO_START, message=str(exc))
    cgroup = RunCgroup.create(
        memory_bytes=limits.memory_mb * _MB,
        max_processes=limits.max_processes,
        cpu_share=limits.cpu_share,
    )
    # Without a cpu cgroup the quota is a watch that stops the run rather than slowing it.
    quota = None if "cpu" in cgroup.dirs else CpuQuotaWatch(limits.cpu_share)
    watched = None
    try:
        budgets = {k: why for k, why in cgroup.missing.items() if k in _FULL_ISOLATION_BUDGETS}
        if limits.require_full_isolation and budgets:
            missing = "; ".join(f"{name}: {why}" for name, why in budgets.items())
            return SandboxResult(
                outcome=SandboxOutcome.FAILED_TO_START,
                message=f"sandbox refused to run: no per-run budget here ({missing})",
            )
        config = {
            "caller_pid": os.getpid(),
            "python": python,
            "workdir": _WORKDIR,
            "rootfs": plan,
            "uid": uid,
            "gid": gid,
            "cpu_seconds": limits.cpu_seconds,
            "memory_bytes": limits.memory_mb * _MB,
            "file_bytes": limits.file_size_mb * _MB,
            "disk_bytes": limits.disk_mb * _MB,
            "max_processes": limits.max_processes,
            "max_open_files": limits.max_open_files,
            "cgroup_procs": cgroup.join_files(),
            "pids_cgroup": "pids" in cgroup.dirs,
            "memory_cgroup": "memory" in cgroup.dirs,
            "require_full_isolation": limits.require_full_isolation,
            "env": _minimal_env(_WORKDIR),
        }
        try:
            clock = ProgramClock(
                timeout_s=limits.timeout_s,
                wall_timeout_s=limits.wall_limit_s,
                start_timeout_s=START_TIMEOUT_S,
            )
            watched = start_and_watch(
                config,
                code.encode("utf-8", errors="surrogatepass"),
                clock=clock,
                keep_chars=limits.max_output_chars,
                max_bytes=limits.max_output_bytes,
                quota=quota,
            )
        except OSError as exc:
            return SandboxResult(
                outcome=SandboxOutcome.FAILED_TO_START,
                message=f"the sandbox could not start: {exc}",
            )
        return interpret(watched, limits, uid, cgroup, quota)
    finally:
        cgroup.remove()  # kills whatever escaped the PID namespace's teardown, if anything did
        host_workdir = watched.records.get("launcher", {}).get("host_workdir") if watched else None
        if host_workdir:  # only without a mount namespace; the launcher removes it normally
            shutil.rmtree(host_workdir, ignore_errors=True)


def _refuse_code(code: str) -> SandboxResult | None:
    """A program Python would misread, refused before anything runs.

    The interpreter stops reading a line at a NUL byte, so code holding one would run only in
    part and could end "ok" having skipped the rest.
    """
    at = code.find("\0")
    if at < 0:
        return None
    line = code.count("\n", 0, at) + 1
    column = at - (code.rfind("\n", 0, at) + 1) + 1
    return SandboxResult(
        outcome=SandboxOutcome.INVALID_INPUT,
        message=(
            f"the code holds a NUL byte at line {line}, column {column}; Python source cannot "
            "contain NUL bytes, so nothing was run"
        ),
    )


def python_sandbox(
    limits: SandboxLimits | None = None,
    *,
    name: str = "python_sandbox",
    description: str | None = None,
) -> Tool:
    """A tool that runs model-written Python in a sandbox with `limits`.

    By default the description tells the model what isolation this machine enforces (found
    by running an empty program once); pass `description` for wording that must not depend
    on the machine, such as a recorded suite's.
    """
    limits = limits or SandboxLimits()

    def run(code: str) -> ToolResult:
        """Run a complete Python 3 program and return what it printed.

        Args:
            code: the program's source; print() every result you need to see.
        """
        return run_python(code, limits).to_tool_result()

    description = description or (
        "Run a Python 3 program in an isolated sandbox and return its stdout and stderr. "
        f"{_isolation_summary(sandbox_isolation())} "
        f"Limits: {limits.timeout_s:g} s wall clock, {limits.cpu_seconds} s CPU, "
        f"{limits.memory_mb} MB memory, {limits.max_processes} processes, "
        f"{limits.max_output_chars:,} characters of output kept per stream."
    )
    return Tool(
        run,
        name=name,
        description=description,
        effect=Effect.READ_ONLY,  # it cannot reach anything outside itself
        idempotent=True,
        # No tool-level wall clock: the sandbox bounds its start and the program itself, and
        # one here would put back the machine's speed that the program's limits leave out.
        timeout_s=None,
        max_result_chars=2 * limits.max_output_chars + 2_000,
    )


@functools.cache
def sandbox_isolation() -> SandboxResult:
    """What the sandbox enforces on this machine, found by running an empty program once.

    Its `isolation` lists each fact and its `warnings` say what is missing; a description the
    model reads should promise no more than this.
    """
    return run_python("pass")


def _isolation_summary(probe: SandboxResult) -> str:
    if probe.outcome is not SandboxOutcome.OK:
        return f"Warning: the sandbox does not work on this machine ({probe.message})."
    if probe.warnings:
        return "Isolation is partial on this machine: " + "; ".join(probe.warnings) + "."
    return (
        "There is no network; the filesystem holds only the interpreter and its standard "
        "library (read-only) and a private /tmp with the working directory, discarded after "
        "each call."
    )


def _sandbox_ids(user: str) -> tuple[int | None, int | None]:
    """The uid/gid to drop to: only root drops; everyone else gets a user namespace instead."""
    if os.geteuid() != 0:
        return None, None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise UsageError(f"sandbox user {user!r} does not exist on this machine") from None
    if entry.pw_uid == 0:
        raise UsageError(f"sandbox user {user!r} is root; choose an unprivileged user")
    return entry.pw_uid, entry.pw_gid


def _pick_interpreter(configured: str | None, *, sandbox_uid: int | None) -> str:
    if configured is not None:
        if shutil.which(configured) is None:
            raise UsageError(f"sandbox interpreter {configured!r} is not an executable file")
        return str(shutil.which(configured))
    if sandbox_uid is None:
        return sys.executable  # the code runs as us, so our interpreter is readable
    # An unprivileged user cannot run an interpreter under /root (pyenv, a venv's target).
    candidates = [(sys.executable, Path(sys.base_prefix))]
    candidates += [(p, Path(os.path.realpath(p)).parent.parent) for p in _SYSTEM_PYTHONS]
    for python, prefix in candidates:
        if os.path.exists(python) and _others_can_use(python) and _others_can_use(prefix / "lib"):
            return os.path.realpath(python)
    raise UsageError(
        f"no Python interpreter that an unprivileged user can run: {sys.executable} lives "
        "where others cannot read; set SandboxLimits(python=...) to a world-readable one"
    )


def _others_can_use(path: str | Path) -> bool:
    """True if every directory on the way is searchable and the target readable by others."""
    real = Path(os.path.realpath(path))
    try:
        for directory in real.parents:
            if not os.stat(directory).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(real).st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IROTH and mode & stat.S_IXOTH)


@functools.cache
def _prefixes(python: str) -> list[str]:
    """The directories the interpreter loads its standard library and extensions from."""
    query = "import sys; print(sys.base_prefix); print(sys.base_exec_prefix)"
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", query], capture_output=True, text=True, timeout=30, env={}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"sandbox interpreter {python} cannot be run: {exc}") from None
    if done.returncode != 0:
        raise UsageError(f"sandbox interpreter {python} failed: {done.stderr.strip()[-500:]}")
    return sorted(set(done.stdout.split()))


def _passwd_entry(user: str, uid: int | None, gid: int | None) -> tuple[str, int, int]:
    # In a user namespace (not root) the code is uid 1000 there; see the launcher.
    return (user, uid, gid) if uid is not None and gid is not None else ("sandbox", 1000, 1000)


def _minimal_env(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
    }
