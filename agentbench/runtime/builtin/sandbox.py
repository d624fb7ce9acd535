"""The `python_sandbox` tool: model-written Python run in an isolated process, never in ours.

`run_python` writes nothing into the host interpreter: it starts `_sandbox_launcher.py` (the
isolation: namespaces, read-only filesystem, resource limits, an unprivileged user) through
`_sandbox_process` (the supervision: wall-clock timeout, output caps, killing the process
group), then reads how the program ended into a `SandboxResult`. `python_sandbox()` wraps that
as an agentbench `Tool`. Whatever the kernel refused to enforce is listed in
`SandboxResult.warnings`, and the model sees those warnings too, so nobody mistakes a partial
sandbox for a full one.
"""

from __future__ import annotations

import enum
import functools
import os
import pwd
import re
import shutil
import signal
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentbench.errors import UsageError
from agentbench.runtime.builtin._sandbox_process import Watched, start_and_watch
from agentbench.runtime.tools import Effect, Tool, ToolResult

_SETUP_FAILED = 125  # the launcher's exit code for "could not finish isolating"
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
_MB = 1024 * 1024


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed run may use. Every limit applies to every process the code starts."""

    timeout_s: float = 10.0  # wall clock; then the whole process tree is killed
    cpu_seconds: int = 5  # CPU time per process (RLIMIT_CPU)
    memory_mb: int = 512  # address space per process (RLIMIT_AS)
    file_size_mb: int = 16  # largest file the code may write (RLIMIT_FSIZE)
    disk_mb: int = 64  # size of the private /tmp the working directory lives in
    max_processes: int = 16  # processes and threads of the sandbox user (RLIMIT_NPROC)
    max_open_files: int = 64  # open descriptors per process (RLIMIT_NOFILE)
    max_output_chars: int = 8_000  # kept of stdout and of stderr each (head and tail)
    max_output_bytes: int = 4 * _MB  # stdout + stderr past this stops the program
    python: str | None = None  # interpreter for the code; None picks one the sandbox can run
    user: str = "nobody"  # who the code runs as when we are root
    # Refuse to run (system_error) rather than run with a warning where the kernel gives no
    # network, PID or mount namespace.
    require_full_isolation: bool = False

    def __post_init__(self) -> None:
        for name in (
            "timeout_s",
            "cpu_seconds",
            "memory_mb",
            "file_size_mb",
            "disk_mb",
            "max_processes",
            "max_open_files",
            "max_output_chars",
            "max_output_bytes",
        ):
            value = getattr(self, name)
            if not value > 0:
                raise UsageError(f"SandboxLimits.{name} must be positive, got {value!r}")


class SandboxOutcome(enum.StrEnum):
    OK = "ok"
    ERROR = "error"  # the code raised or exited non-zero
    TIMEOUT = "timeout"
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    CRASHED = "crashed"  # killed by a signal it did not ask for (SIGSEGV from ctypes, …)
    FAILED_TO_START = "failed_to_start"  # our fault, not the code's


class SandboxResult(BaseModel):
    """How one sandboxed program ended, what it printed, and what isolation it ran under."""

    model_config = ConfigDict(frozen=True)

    outcome: SandboxOutcome
    message: str  # one line: what happened, in words the model can act on
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None
    duration_ms: float = 0.0
    cpu_seconds: float | None = None
    isolation: dict[str, Any] = {}  # what the launcher enforced, fact by fact
    warnings: list[str] = []  # what could not be enforced on this machine

    def to_tool_result(self) -> ToolResult:
        data: dict[str, Any] = {"stdout": self.stdout}
        if self.stderr:
            data["stderr"] = self.stderr
        if self.warnings:
            data["sandbox_warnings"] = self.warnings
        if self.outcome is SandboxOutcome.OK:
            return ToolResult.ok(data)
        if self.outcome is SandboxOutcome.FAILED_TO_START:
            return ToolResult.system_error(f"{self.message}\n{self.stderr}".strip())
        return ToolResult.business_failure(self.message, data)


def run_python(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run `code` as a Python program in a sandbox and report how it ended. Never raises."""
    limits = limits or SandboxLimits()
    try:
        uid, gid = _sandbox_ids(limits.user)
        python = _pick_interpreter(limits.python, sandbox_uid=uid)
    except UsageError as exc:
        return SandboxResult(outcome=SandboxOutcome.FAILED_TO_START, message=str(exc))
    workdir = tempfile.mkdtemp(prefix="agentbench-sandbox-")
    try:
        if uid is not None:
            # Used as is only where no mount namespace replaces it with a private tmpfs.
            os.chown(workdir, uid, gid)
        config = {
            "python": python,
            "workdir": workdir,
            "uid": uid,
            "gid": gid,
            "cpu_seconds": limits.cpu_seconds,
            "memory_bytes": limits.memory_mb * _MB,
            "file_bytes": limits.file_size_mb * _MB,
            "disk_bytes": limits.disk_mb * _MB,
            "max_processes": limits.max_processes,
            "max_open_files": limits.max_open_files,
            "hidden_paths": _paths_to_hide(python, workdir),
            "require_full_isolation": limits.require_full_isolation,
            "env": _minimal_env(workdir),
        }
        try:
            watched = start_and_watch(
                config,
                code.encode("utf-8", errors="surrogatepass"),
                timeout_s=limits.timeout_s,
                keep_chars=limits.max_output_chars,
                max_bytes=limits.max_output_bytes,
            )
        except OSError as exc:
            return SandboxResult(
                outcome=SandboxOutcome.FAILED_TO_START,
                message=f"the sandbox could not start: {exc}",
            )
        return _interpret(watched, limits, uid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
        # Our own timeout fires first and reports what happened; this is only a backstop.
        timeout_s=limits.timeout_s + 5.0,
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
        "There is no network; only the working directory and /tmp are writable, and both are "
        "discarded after each call."
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


def _paths_to_hide(python: str, workdir: str) -> list[str]:
    # Home directories hold keys and credentials; hide them unless the code needs them to run.
    homes = {"/root", os.path.expanduser("~")}
    needed = (os.path.realpath(python), os.path.realpath(workdir))
    return sorted(
        home
        for home in homes
        if os.path.isdir(home) and home != "/" and not any(_is_under(n, home) for n in needed)
    )


def _is_under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _minimal_env(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
    }


def _interpret(watched: Watched, limits: SandboxLimits, uid: int | None) -> SandboxResult:
    launcher = watched.records.get("launcher", {})
    child = watched.records.get("child", {})
    ending = watched.records.get("exit", {})
    isolation = {**launcher, **child}
    common: dict[str, Any] = {
        "stdout": watched.stdout.text(),
        "stderr": watched.stderr.text(),
        "truncated": watched.stdout.truncated or watched.stderr.truncated,
        "duration_ms": watched.duration_s * 1000,
        "cpu_seconds": ending.get("cpu_seconds"),
        "exit_code": ending.get("exit_code"),
        "signal": _signal_name(ending.get("signal")),
        "isolation": isolation,
        "warnings": _warnings(isolation, uid),
    }
    outcome, message = _classify(watched, ending, bool(child), limits)
    return SandboxResult(outcome=outcome, message=message, **common)


def _classify(
    watched: Watched, ending: dict[str, Any], child_started: bool, limits: SandboxLimits
) -> tuple[SandboxOutcome, str]:
    if watched.killed_for == "timeout":
        return SandboxOutcome.TIMEOUT, (
            f"timed out after {limits.timeout_s:g} s (wall clock); every process was killed"
        )
    if watched.killed_for == "output":
        return SandboxOutcome.OUTPUT_LIMIT, (
            f"stopped: the program wrote more than {limits.max_output_bytes:,} bytes of output"
        )
    if not ending or (ending.get("exit_code") == _SETUP_FAILED and not child_started):
        return SandboxOutcome.FAILED_TO_START, "the sandbox could not start the program"
    signum = ending.get("signal")
    cpu = ending.get("cpu_seconds") or 0.0
    # The kernel's CPU accounting runs a little ahead of the rusage we read back; nothing but
    # RLIMIT_CPU sends SIGKILL to a process that has used nearly all of its CPU time.
    near_cpu_limit = cpu >= 0.9 * limits.cpu_seconds
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and near_cpu_limit):
        return SandboxOutcome.CPU_LIMIT, f"CPU time limit of {limits.cpu_seconds} s exceeded"
    stderr = watched.stderr.text()
    last_line = _last_line(stderr)
    if last_line.startswith("MemoryError"):
        return SandboxOutcome.MEMORY_LIMIT, f"memory limit of {limits.memory_mb} MB exceeded"
    if signum is not None:
        return SandboxOutcome.CRASHED, f"the program was killed by {_signal_name(signum)}"
    code = ending.get("exit_code")
    if code == 0:
        return SandboxOutcome.OK, "exited normally"
    if "Traceback (most recent call last)" in stderr and last_line:
        return SandboxOutcome.ERROR, f"the program raised {last_line}"
    return SandboxOutcome.ERROR, f"the program exited with code {code}"


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")


def _last_line(text: str) -> str:
    """The exception line of the traceback: the last line that names an exception.

    Forked children writing tracebacks at once interleave their lines, so the literal last
    line may be a traceback's first; the last exception-looking line is what was raised.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else ""


def _signal_name(signum: int | None) -> str | None:
    if signum is None:
        return None
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _warnings(isolation: dict[str, Any], uid: int | None) -> list[str]:
    """Say in plain words what this run was *not* protected by."""
    if not isolation:
        return []
    warnings = []
    if isolation.get("network_namespace") != "ok":
        warnings.append("network NOT blocked: no network namespace on this machine")
    if isolation.get("pid_namespace") != "ok":
        warnings.append("no PID namespace: a process in a session of its own may outlive the run")
    if not str(isolation.get("filesystem", "")).startswith("read-only"):
        warnings.append("filesystem not isolated: the code may write wherever its user may")
    if uid is None and isolation.get("user_namespace") != "ok":
        warnings.append("runs as the calling user without a user namespace")
    if isolation.get("still_writable"):
        warnings.append(f"still writable: {', '.join(isolation['still_writable'])}")
    return warnings
