"""`SandboxLimits`: what one sandboxed run may use. Kept apart from the tool (`sandbox`), which
sets them, so that what reads them (`_sandbox_outcome`, judging how a run ended) does not
import the tool."""

from __future__ import annotations

from dataclasses import dataclass

from agentbench.errors import UsageError

MB = 1024 * 1024


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed run may use. Every limit applies to every process the code starts."""

    # The program's wall-clock time less the time the machine held it back (start-up not
    # counted); then the whole process tree is killed.
    timeout_s: float = 10.0
    cpu_seconds: int = 5  # CPU time per process (RLIMIT_CPU: SIGXCPU, then SIGKILL 1 s later)
    # CPUs the run's processes may keep busy together: a cgroup's CPU quota throttles them;
    # where none can be made, a run over it is stopped (`_sandbox_cpu`).
    cpu_share: float = 1.0
    memory_mb: int = 512  # for the whole run (cgroup); where none, per process (RLIMIT_AS)
    file_size_mb: int = 16  # largest file the code may write (RLIMIT_FSIZE)
    disk_mb: int = 64  # size of the private /tmp the working directory lives in
    max_processes: int = 16  # processes and threads of the run (cgroup pids.max)
    max_open_files: int = 64  # open descriptors per process (RLIMIT_NOFILE)
    max_output_chars: int = 8_000  # kept of stdout and of stderr each (head and tail)
    max_output_bytes: int = 4 * MB  # stdout + stderr past this stops the program
    python: str | None = None  # interpreter for the code; None picks one the sandbox can run
    user: str = "nobody"  # who the code runs as when we are root
    # Refuse to run (system_error) rather than run with a warning where the machine gives no
    # network, PID or mount namespace, minimal filesystem, syscall filter or per-run cgroups.
    require_full_isolation: bool = False
    # Plain wall clock from the program's start, a backstop for a program the machine never
    # lets run; None: ten times timeout_s, at least a minute.
    wall_timeout_s: float | None = None

    @property
    def wall_limit_s(self) -> float:
        if self.wall_timeout_s is not None:
            return self.wall_timeout_s
        return max(60.0, 10 * self.timeout_s)

    def __post_init__(self) -> None:
        for name in (
            "timeout_s",
            "cpu_seconds",
            "cpu_share",
            "memory_mb",
            "file_size_mb",
            "disk_mb",
            "max_processes",
            "max_open_files",
            "max_output_chars",
            "max_output_bytes",
            "wall_limit_s",
        ):
            value = getattr(self, name)
            if not value > 0:
                raise UsageError(f"SandboxLimits.{name} must be positive, got {value!r}")
