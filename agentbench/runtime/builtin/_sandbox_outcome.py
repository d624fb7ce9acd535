"""How a sandboxed run ended, in words the model can act on, and what it was not protected by.

`interpret` turns what the supervisor and the kernel recorded (the launcher's report records,
the program's signal or exit code, its rusage, the run cgroup's OOM-kill, pids and CPU-time
counters) into a `SandboxResult`: the outcome comes from what happened, never from guessing at
output. The CPU time reported is the whole run's (every process the program started, living or
ended); the CPU limit is judged on the program's own process, as RLIMIT_CPU counts.
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
from agentbench.runtime.builtin._sandbox_cpu import WATCHED, CpuQuotaWatch
from agentbench.runtime.builtin._sandbox_process import Watched
from agentbench.runtime.tools import ToolResult

if TYPE_CHECKING:
    from agentbench.runtime.builtin._sandbox_limits import SandboxLimits

# rusage may read well below the CPU time RLIMIT_CPU counted (seen: 1.76 s at a 2 s limit);
# a SIGXCPU or SIGKILL the kernel sent at the limit still reads above this share of it.
_CPU_CAUGHT_SHARE = 0.8
# Without a memory cgroup, RLIMIT_AS (address space) is the limit and no counter records that
# it refused an allocation; a peak resident size this close to it is the kernel's sign that it
# did (the interpreter's own mappings keep the peak below the address space).
_MEMORY_REACHED_SHARE = 0.75
_MB = 1024 * 1024


class SandboxOutcome(enum.StrEnum):
    OK = "ok"
    ERROR = "error"  # the code raised or exited non-zero
    TIMEOUT = "timeout"
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    CRASHED = "crashed"  # killed by a signal it did not ask for (SIGSEGV from ctypes, …)
    FAILED_TO_START = "failed_to_start"  # our fault, not the code's
    INVALID_INPUT = "invalid_input"  # refused before it ran: the code cannot be run as given


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
    # CPU time of every process of the run, living or ended (the run cgroup's count; without
    # one, what the sandbox's init and the quota's watch read in /proc); None if none could say.
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
    watched: Watched,
    limits: SandboxLimits,
    uid: int | None,
    cgroup: RunCgroup,
    quota: CpuQuotaWatch | None,
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
    isolation["cpu_quota"] = _cpu_quota(limits, cgroup, quota)
    usage = cgroup.usage()
    outcome, message = _classify(watched, usage, limits, memory_per_run="memory" in cgroup.dirs)
    return SandboxResult(
        outcome=outcome,
        message=message,
        stdout=watched.stdout.text(),
        stderr=watched.stderr.text(),
        truncated=watched.stdout.truncated or watched.stderr.truncated,
        duration_ms=watched.duration_s * 1000,
        cpu_seconds=_run_cpu_seconds(ending, usage, quota),
        exit_code=ending.get("exit_code"),
        signal=_signal_name(ending.get("signal")),
        isolation=isolation,
        warnings=_warnings(isolation, uid, cgroup.missing),
    )


def _classify(
    watched: Watched, usage: CgroupUsage, limits: SandboxLimits, memory_per_run: bool
) -> tuple[SandboxOutcome, str]:
    stopped = _stopped_early(watched, limits)
    if stopped is not None:
        return stopped
    ending = watched.records["exit"]
    signum, code = ending.get("signal"), ending.get("exit_code")
    if signum is None and code == 0:
        return SandboxOutcome.OK, "exited normally"
    over = _over_a_limit(ending, usage, limits, memory_per_run)
    if over is not None:
        return over
    if signum is not None:
        return SandboxOutcome.CRASHED, _killed_by(signum, ending, limits)
    note = ""
    if usage.process_limit_hits:
        note = f" (the limit of {limits.max_processes} processes and threads was reached)"
    # The outcome is the exit code's; the traceback's last line only names what was raised.
    stderr = watched.stderr.text()
    last_line = _last_line(stderr)
    if "Traceback (most recent call last)" in stderr and last_line:
        return SandboxOutcome.ERROR, f"the program raised {last_line}{note}"
    return SandboxOutcome.ERROR, f"the program exited with code {code}{note}"


def _over_a_limit(
    ending: dict[str, Any], usage: CgroupUsage, limits: SandboxLimits, memory_per_run: bool
) -> tuple[SandboxOutcome, str] | None:
    """The limit that ended a failed program, by the kernel's evidence alone, if one did.

    Never by what the program printed: any program can print `MemoryError` and exit 1.
    """
    memory = (SandboxOutcome.MEMORY_LIMIT, f"memory limit of {limits.memory_mb} MB exceeded")
    if memory_per_run and usage.oom_kills:
        return memory  # the cgroup's OOM killer: the whole tree was over its budget
    peak_bytes = (ending.get("max_rss_kb") or 0) * 1024
    if not memory_per_run and peak_bytes >= _MEMORY_REACHED_SHARE * limits.memory_mb * _MB:
        return memory  # RLIMIT_AS, the only limit here, leaves no counter: the peak is the sign
    # The program's own process, as RLIMIT_CPU counts (per process): never the run's, which
    # holds its children's CPU time however little the program used itself.
    cpu_s = ending.get("program_cpu_seconds") or 0.0
    if ending.get("signal") in (signal.SIGXCPU, signal.SIGKILL) and (
        cpu_s >= _CPU_CAUGHT_SHARE * limits.cpu_seconds
    ):
        # RLIMIT_CPU: SIGXCPU at the soft limit (the program is not PID 1, so it receives it),
        # SIGKILL at the hard limit a second later if it caught that. A signal the program's
        # own processes sent it arrives with less CPU time used.
        return SandboxOutcome.CPU_LIMIT, f"CPU time limit of {limits.cpu_seconds} s exceeded"
    return None


def _killed_by(signum: int, ending: dict[str, Any], limits: SandboxLimits) -> str:
    said = f"the program was killed by {_signal_name(signum)}"
    if signum == signal.SIGXCPU:
        # Below the limit the kernel sends no SIGXCPU; inside the PID namespace only the
        # program's own processes can.
        said += (
            f" from its own processes, not the CPU limit (its process had used "
            f"{ending.get('program_cpu_seconds') or 0.0:.2f} s of the {limits.cpu_seconds} s of "
            "CPU time each process may use)"
        )
    return said


def _run_cpu_seconds(
    ending: dict[str, Any], usage: CgroupUsage, quota: CpuQuotaWatch | None
) -> float | None:
    """CPU time of all the run's processes: the cgroup's count, which holds every process
    that ran in it; else the most of what init read as the program ended and the quota
    watch's last look (a run we killed has only that)."""
    if usage.cpu_seconds is not None:
        return usage.cpu_seconds
    at_its_end = ending.get("run_cpu_seconds")
    counted = [] if at_its_end is None else [at_its_end]
    if quota is not None and quota.measures == WATCHED:
        counted.append(quota.used_s)
    return max(counted, default=None)


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
    if watched.killed_for == "cpu_quota":
        used_s, over_s = watched.cpu_used or (0.0, 0.0)
        return SandboxOutcome.CPU_LIMIT, (
            f"stopped: its processes together used {used_s:.1f} s of CPU time in {over_s:.1f} s, "
            f"more than the quota of {limits.cpu_share:g} CPU allows (no cpu cgroup here to "
            "slow them down, so a run over its quota is stopped)"
        )
    if watched.killed_for == "output":
        return SandboxOutcome.OUTPUT_LIMIT, (
            f"stopped: the program wrote more than {limits.max_output_bytes:,} bytes of output"
        )
    if not started or "exit" not in records:
        reason = records.get("failed", {}).get("reason") or _silent_end(records)
        return SandboxOutcome.FAILED_TO_START, f"the sandbox could not run the program: {reason}"
    return None


def _cpu_quota(limits: SandboxLimits, cgroup: RunCgroup, quota: CpuQuotaWatch | None) -> str:
    """The CPU quota and what held it, for the isolation facts."""
    share = f"{limits.cpu_share:g} CPU per run"
    if "cpu" in cgroup.dirs:
        return f"{share} (cgroup v{cgroup.versions['cpu']})"
    if quota is not None and quota.measures == WATCHED:
        return f"{share}, {WATCHED}"
    why = quota.measures if quota is not None else "no cpu cgroup"
    return f"none ({why}): CPU time per process only"


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
    return _isolation_warnings(isolation, uid) + _budget_warnings(isolation, missing_budgets or {})


def _isolation_warnings(isolation: dict[str, Any], uid: int | None) -> list[str]:
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
            "mount, bpf, io_uring, new namespaces and sockets other than Unix ones (vsock, "
            "netlink, packet, inet) are not denied; each run still gets a fresh session "
            "keyring and an emptied user keyring"
        )
    if isolation.get("init_cmdline", "neutral") != "neutral":
        warnings.append("/proc/1/cmdline shows the launcher's command line (host paths)")
    if isolation.get("cgroup_namespace", "ok") != "ok":
        warnings.append("/proc/self/cgroup shows the host's cgroup paths (no cgroup namespace)")
    return warnings


def _budget_warnings(isolation: dict[str, Any], missing: dict[str, str]) -> list[str]:
    warnings = []
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
    if str(isolation.get("cpu_quota", "")).startswith("none"):
        warnings.append(
            f"no CPU quota ({missing.get('cpu', 'no cpu cgroup')}, and no task children in "
            "/proc to watch): its processes together may keep every CPU busy until the timeout"
        )
    elif "cpu" in missing:
        warnings.append(
            f"CPU quota watched, not throttled ({missing['cpu']}): a run whose processes "
            "together use more CPUs than their share is stopped rather than slowed"
        )
    return warnings
