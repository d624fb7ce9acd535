"""How a sandboxed run ended, in words the model can act on, and what it was not protected by.

`interpret` turns what the supervisor and the kernel recorded (the launcher's report records,
the program's signal or exit code, its rusage, the run cgroup's OOM-kill and pids counters)
into a `SandboxResult`: the outcome comes from what happened, never from guessing at output.
`_warnings` says in plain words what this machine could not enforce.
"""

from __future__ import annotations

import enum
import re
import signal
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from agentbench.runtime.builtin._sandbox_cgroup import CgroupUsage, RunCgroup
from agentbench.runtime.builtin._sandbox_clock import START_TIMEOUT_S, WALL_CLOCK
from agentbench.runtime.builtin._sandbox_process import Watched
from agentbench.runtime.tools import ToolResult

if TYPE_CHECKING:
    from agentbench.runtime.builtin.sandbox import SandboxLimits

# rusage may read well below the CPU time RLIMIT_CPU counted (seen: 1.78 s at a 2 s limit);
# a SIGKILL at the hard limit (soft + 1 s) still reads above this share of the soft limit.
_CPU_CAUGHT_SHARE = 0.8


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


def interpret(
    watched: Watched, limits: SandboxLimits, uid: int | None, cgroup: RunCgroup
) -> SandboxResult:
    """How the run ended, from what happened: report records, signal, rusage, cgroup counters."""
    records = watched.records
    ending = records.get("exit", {})
    isolation = {**records.get("launcher", {}), **records.get("child", {})}
    isolation.pop("host_workdir", None)
    isolation["time_limit"] = watched.clock or WALL_CLOCK  # what timeout_s was read on
    for controller, budget in (("memory", "memory_budget"), ("pids", "process_budget")):
        if controller in cgroup.dirs:
            isolation[budget] = f"per run (cgroup v{cgroup.versions[controller]})"
        else:
            isolation[budget] = "per process" if controller == "memory" else "per user"
    usage = cgroup.usage()
    outcome, message = _classify(watched, usage, limits)
    return SandboxResult(
        outcome=outcome,
        message=message,
        stdout=watched.stdout.text(),
        stderr=watched.stderr.text(),
        truncated=watched.stdout.truncated or watched.stderr.truncated,
        duration_ms=watched.duration_s * 1000,
        cpu_seconds=ending.get("cpu_seconds"),
        exit_code=ending.get("exit_code"),
        signal=_signal_name(ending.get("signal")),
        isolation=isolation,
        warnings=_warnings(isolation, uid, cgroup.missing),
    )


def _classify(
    watched: Watched, usage: CgroupUsage, limits: SandboxLimits
) -> tuple[SandboxOutcome, str]:
    stopped = _stopped_early(watched, limits)
    if stopped is not None:
        return stopped
    ending = watched.records["exit"]
    signum = ending.get("signal")
    memory = (SandboxOutcome.MEMORY_LIMIT, f"memory limit of {limits.memory_mb} MB exceeded")
    cpu = (SandboxOutcome.CPU_LIMIT, f"CPU time limit of {limits.cpu_seconds} s exceeded")
    if signum == signal.SIGKILL and usage.oom_kills:
        return memory  # the cgroup's OOM killer: the whole tree was over its memory budget
    if signum == signal.SIGXCPU:
        return cpu  # RLIMIT_CPU's soft limit (the program is not PID 1, so it receives it)
    if signum == signal.SIGKILL and (ending.get("cpu_seconds") or 0.0) >= _CPU_CAUGHT_SHARE * (
        limits.cpu_seconds
    ):
        return cpu  # it caught SIGXCPU and met the hard limit a second later
    if signum is not None:
        return SandboxOutcome.CRASHED, f"the program was killed by {_signal_name(signum)}"
    code = ending.get("exit_code")
    if code == 0:
        return SandboxOutcome.OK, "exited normally"
    stderr = watched.stderr.text()
    last_line = _last_line(stderr)
    if last_line.startswith("MemoryError") or usage.oom_kills:
        return memory
    note = ""
    if usage.process_limit_hits:
        note = f" (the limit of {limits.max_processes} processes and threads was reached)"
    if "Traceback (most recent call last)" in stderr and last_line:
        return SandboxOutcome.ERROR, f"the program raised {last_line}{note}"
    return SandboxOutcome.ERROR, f"the program exited with code {code}{note}"


def _stopped_early(watched: Watched, limits: SandboxLimits) -> tuple[SandboxOutcome, str] | None:
    """Our own stops, and a program that never started (the sandbox's fault, not the code's)."""
    records = watched.records
    started = "started" in records and "failed" not in records
    if watched.killed_for == "start" or (watched.killed_for in ("timeout", "wall") and not started):
        return SandboxOutcome.FAILED_TO_START, (
            f"the sandbox did not start the program within {START_TIMEOUT_S:g} s"
        )
    if watched.killed_for == "timeout":
        return SandboxOutcome.TIMEOUT, (
            f"timed out after {limits.timeout_s:g} s ({watched.clock or WALL_CLOCK}); every "
            "process was killed"
        )
    if watched.killed_for == "wall":
        return SandboxOutcome.TIMEOUT, (
            f"did not finish within {limits.wall_limit_s:g} s of wall-clock time; every process "
            "was killed"
        )
    if watched.killed_for == "output":
        return SandboxOutcome.OUTPUT_LIMIT, (
            f"stopped: the program wrote more than {limits.max_output_bytes:,} bytes of output"
        )
    if not started or "exit" not in records:
        reason = records.get("failed", {}).get("reason") or _silent_end(records)
        return SandboxOutcome.FAILED_TO_START, f"the sandbox could not run the program: {reason}"
    return None


def _silent_end(records: dict[str, dict[str, Any]]) -> str:
    init = records.get("init")
    if init is None:
        return "the launcher ended without a report"
    if "signal" in init:
        return f"the sandbox's init was killed by {_signal_name(init['signal'])}"
    return f"the sandbox's init exited with code {init.get('exit_code')} without a report"


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


def _warnings(
    isolation: dict[str, Any], uid: int | None, missing_budgets: dict[str, str] | None = None
) -> list[str]:
    """Say in plain words what this run was *not* protected by."""
    if not isolation:
        return []
    warnings = []
    if isolation.get("network_namespace") != "ok":
        warnings.append("network NOT blocked: no network namespace on this machine")
    if isolation.get("pid_namespace") != "ok":
        warnings.append("no PID namespace: a process in a session of its own may outlive the run")
    if isolation.get("filesystem") != "ok":
        warnings.append(
            "filesystem not isolated: the code sees the host's files and sockets and may write "
            "wherever its user may"
        )
    if uid is None and isolation.get("user_namespace") != "ok":
        warnings.append("runs as the calling user without a user namespace")
    seccomp = str(isolation.get("seccomp", "unavailable"))
    if seccomp != "ok":
        warnings.append(
            f"no syscall filter ({seccomp.removeprefix('unavailable: ')}): keyrings, ptrace, "
            "mount, bpf, io_uring and new namespaces are not denied; each run still gets a "
            "fresh session keyring and an emptied user keyring"
        )
    missing = missing_budgets or {}
    if "memory" in missing:
        warnings.append(
            f"memory limit per process only, not per run ({missing['memory']}): several "
            "processes may together use more"
        )
    if "pids" in missing:
        warnings.append(
            f"process limit per user, not per run ({missing['pids']}): concurrent sandboxes "
            "share it"
        )
    return warnings
