"""The clock a sandboxed program's time limit is read on: the program's time, not the machine's.

A loaded machine stretches a program's wall-clock time without the program doing more: the
sandbox starting (an interpreter, namespaces, a root filesystem, another interpreter) takes
seconds there, and a program that computes for one second may wait four more for a CPU. So
`ProgramClock` starts when the program does (the kernel's start time of the sandbox init's
first child), not when the launcher does — starting has a bound of its own — and counts wall
time less the time the machine held the program back. Every 20 ms it reads, for every thread
of every process under the sandbox's init, the CPU time used and the run-queue wait
(`/proc/PID/task/TID/schedstat`) and the CPUs it may run on, and for those CPUs the time the
whole machine kept them busy (`/proc/stat`). Over each interval dt in which the program's
tasks ran R and waited W, on C CPUs, the program was held back at most min(W, dt − R/C): while
one of its tasks runs it is not held back, and at most C run at once. Waits the program causes
itself (more busy processes than CPUs) are not the machine's: then R/C is dt and nothing is
left out. And in all, no more is left out than the CPU time the rest of the machine took on
those CPUs, so a program that crowds its CPUs in bursts and sleeps between them, or a CPU quota
it runs into, is charged too. Sleeping and blocking are charged; a program crowded off its
CPUs by others is not, so `timeout_s` means the same on an idle machine and a busy one. Where
`/proc/stat` cannot be read, what is left out is min(W, dt − R), as if the program had one CPU
(never more than it was held back). A wall-clock backstop, much longer, still stops a program
the machine never lets run. Where the kernel shows no task children or schedstat, the clock is
the plain wall clock from the program's start (`measures` says which, and the result's
isolation facts name it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

OWN_TIME = "wall clock less waits for CPUs others held"
WALL_CLOCK = "wall clock"
# Starting the sandbox (two interpreters, namespaces, a root filesystem) takes a tenth of a
# second here and many seconds on a starved machine; only a start that never ends is stopped.
START_TIMEOUT_S = 300.0
_LOOK_S = 0.02  # how often the process tree is read while the program runs
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)  # what /proc start times count
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def boot_clock() -> float:
    return time.clock_gettime(_CLOCK)


class ProgramClock:
    """Says when a sandboxed run is past one of its limits (`over`), from the report records
    the launcher writes (`forked`: the init's pid; `started`: the program exec'd)."""

    def __init__(
        self,
        *,
        timeout_s: float,
        wall_timeout_s: float,
        start_timeout_s: float,
        proc: Path = Path("/proc"),
        now: Callable[[], float] = boot_clock,
    ) -> None:
        self.timeout_s = timeout_s
        self.wall_timeout_s = wall_timeout_s
        self.start_timeout_s = start_timeout_s
        self.measures = OWN_TIME
        self._proc = proc
        self._now = now
        self._launched = now()
        self._init: int | None = None
        self._zero: float | None = None  # when the program started, on `now`'s clock
        self._looked: float | None = None
        self._seen: dict[str, tuple[int, int]] = {}  # task → (CPU time, run-queue wait) (ns)
        self._held_s = 0.0  # the time the program was held back, by its tasks' counters
        # The CPU time the rest of the machine took on the program's CPUs since it started,
        # and each CPU's busy ticks at the last look; None: /proc/stat cannot be read.
        self._others_s = 0.0
        self._busy: dict[int, int] | None = None

    @property
    def stalled_s(self) -> float:
        """The time left out so far: the program was held back by the machine."""
        if self._busy is None:
            return self._held_s
        return max(min(self._held_s, self._others_s), 0.0)

    def saw(self, records: dict[str, dict[str, Any]]) -> None:
        """Take in the launcher's report records read so far."""
        if self._init is None and isinstance(records.get("forked", {}).get("pid"), int):
            self._init = records["forked"]["pid"]
        if self._zero is None and "started" in records:
            self._zero = self._program_start()
            self._busy = _busy_ticks(self._proc)

    def over(self) -> str | None:
        """ "start" (the program never started), "timeout" (its time is up), "wall" (the
        backstop), or None."""
        now = self._now()
        if self._zero is None:
            return "start" if now - self._launched > self.start_timeout_s else None
        if self._looked is None or now - self._looked >= _LOOK_S:
            self._look(now)
        wall = now - self._zero
        if wall > self.wall_timeout_s:
            return "wall"
        if wall - self.stalled_s > self.timeout_s:
            return "timeout"
        return None

    def program_time(self) -> float:
        """The program's time so far: wall clock since it started, less its waits."""
        if self._zero is None:
            return 0.0
        return max(self._now() - self._zero - self.stalled_s, 0.0)

    def _program_start(self) -> float:
        """The kernel's start time of the init's first child (the program), else now."""
        children = self._children(self._init) if self._init is not None else None
        if children is None:
            self.measures = WALL_CLOCK
            return self._now()
        starts = [s for s in (self._start_time(pid) for pid in children) if s is not None]
        return min(starts) if starts else self._now()

    def _look(self, now: float) -> None:
        """Count what held the program back since the last look (the module docstring)."""
        since = max(now - (self._looked if self._looked is not None else self._zero or now), 0.0)
        self._looked = now
        if self.measures == WALL_CLOCK or self._init is None:
            return
        tasks = self._tasks(self._init)
        counters = [(task, self._schedstat(task)) for task in tasks]
        if tasks and all(counted is None for _, counted in counters):
            self.measures = WALL_CLOCK  # no schedstat on this kernel
            return
        ran = waited = 0
        for task, counted in counters:
            if counted is None:
                continue  # it ended between the listing and the read
            before = self._seen.get(task, (0, 0))
            if counted[0] < before[0] or counted[1] < before[1]:
                before = (0, 0)  # a reused id is a new task
            ran += counted[0] - before[0]
            waited += counted[1] - before[1]
            self._seen[task] = counted
        ran_s, waited_s = ran / 1e9, waited / 1e9
        if self._busy is None:  # one CPU assumed: never more left out than was held back
            self._held_s += max(min(waited_s, since - ran_s), 0.0)
            return
        cpus = self._cpus(tasks)
        self._held_s += max(min(waited_s, since - ran_s / len(cpus)), 0.0)
        busy = _busy_ticks(self._proc)
        if busy is None:
            return
        grown = sum(busy.get(cpu, 0) - self._busy.get(cpu, 0) for cpu in cpus)
        self._others_s += grown / _TICKS - ran_s
        self._busy = busy

    def _cpus(self, tasks: list[str]) -> set[int]:
        """The CPUs any of `tasks` may run on (every CPU, where their affinity is unknown)."""
        allowed: set[int] = set()
        for task in tasks:
            pid, tid = task.split("/")
            allowed |= _cpu_list(self._proc / pid / "task" / tid / "status")
        return allowed or set(self._busy or ()) or {0}

    def _tasks(self, init: int) -> list[str]:
        """Every thread of every process under `init` (not init itself), as "pid/tid"."""
        found: list[str] = []
        pending = list(self._children(init) or ())
        while pending:
            pid = pending.pop()
            try:
                threads = os.listdir(self._proc / str(pid) / "task")
            except OSError:
                continue  # it ended meanwhile
            for tid in threads:
                found.append(f"{pid}/{tid}")
                pending.extend(self._read_ints(self._proc / str(pid) / "task" / tid / "children"))
        return found

    def _children(self, pid: int) -> list[int] | None:
        """`pid`'s children (a single-threaded process), or None where the kernel cannot say."""
        path = self._proc / str(pid) / "task" / str(pid) / "children"
        try:
            return [int(word) for word in path.read_text().split()]
        except FileNotFoundError:
            return None if (self._proc / str(pid)).exists() else []
        except (OSError, ValueError):
            return []

    def _schedstat(self, task: str) -> tuple[int, int] | None:
        """The task's CPU time and run-queue wait so far (ns), or None if it is gone."""
        pid, tid = task.split("/")
        fields = self._read_ints(self._proc / pid / "task" / tid / "schedstat")
        return (fields[0], fields[1]) if len(fields) >= 2 else None

    def _start_time(self, pid: int) -> float | None:
        try:
            stat = (self._proc / str(pid) / "stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        return int(fields[19]) / _TICKS  # field 22, starttime, in clock ticks since boot

    @staticmethod
    def _read_ints(path: Path) -> list[int]:
        try:
            return [int(word) for word in path.read_text().split()]
        except (OSError, ValueError):
            return []


def _busy_ticks(proc: Path) -> dict[int, int] | None:
    """Each CPU's busy time so far, in clock ticks (user, nice, system, irq, softirq: the
    time it ran anyone's tasks), from /proc/stat; None where it cannot be read."""
    try:
        lines = (proc / "stat").read_text().splitlines()
    except OSError:
        return None
    busy: dict[int, int] = {}
    for line in lines:
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        ticks = [int(word) for word in rest.split()[:7] if word.isdigit()]
        if len(ticks) == 7:
            user, nice, system, _idle, _iowait, irq, softirq = ticks
            busy[int(name[3:])] = user + nice + system + irq + softirq
    return busy or None


def _cpu_list(status: Path) -> set[int]:
    """The CPUs of a task's `Cpus_allowed_list` ("0-3,6"); empty where it cannot be read."""
    try:
        lines = status.read_text().splitlines()
    except OSError:
        return set()
    for line in lines:
        if line.startswith("Cpus_allowed_list:"):
            cpus: set[int] = set()
            for part in line.partition(":")[2].split(","):
                first, _, last = part.strip().partition("-")
                if first.isdigit() and (last or first).isdigit():
                    cpus.update(range(int(first), int(last or first) + 1))
            return cpus
    return set()
