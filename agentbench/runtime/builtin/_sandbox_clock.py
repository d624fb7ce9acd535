"""The clock a sandboxed program's time limit is read on: the program's time, not the machine's.

A loaded machine stretches a program's wall-clock time without the program doing more: the
sandbox starting (an interpreter, namespaces, a root filesystem, another interpreter) takes
seconds there, and a program that computes for one second may wait four more for a CPU. So
`ProgramClock` starts when the program does (the kernel's start time of the sandbox init's
first child), not when the launcher does — starting has a bound of its own — and counts wall
time less the time the program's processes spent waiting for a CPU: at each look it reads, for
every thread of every process under the sandbox's init, the kernel's run-queue wait
(`/proc/PID/task/TID/schedstat`), and counts the wait that grew since the last look, at most
the time between the looks (however many of its tasks waited at once). A program that sleeps
or blocks is charged, one that waits for a CPU is not, so `timeout_s` means the same on an idle
machine and a busy one. With several tasks the count is generous: a thread's wait is left out
even while another thread sleeping decided how long the program took. A wall-clock backstop,
much longer, still stops a program the machine never lets run. Where the kernel shows no task
children or schedstat, the clock is the plain wall clock from the program's start (`measures`
says which, and the result's isolation facts name it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

OWN_TIME = "wall clock less waits for a CPU"
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
        self._waits: dict[str, int] = {}  # task → run-queue wait seen (ns)
        self.stalled_s = 0.0  # time the program waited for a CPU, so far

    def saw(self, records: dict[str, dict[str, Any]]) -> None:
        """Take in the launcher's report records read so far."""
        if self._init is None and isinstance(records.get("forked", {}).get("pid"), int):
            self._init = records["forked"]["pid"]
        if self._zero is None and "started" in records:
            self._zero = self._program_start()

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
        """Count the CPU waits of the program's tasks that grew since the last look."""
        since = now - (self._looked if self._looked is not None else self._zero or now)
        self._looked = now
        if self.measures == WALL_CLOCK or self._init is None:
            return
        grown = 0
        tasks = self._tasks(self._init)
        waits = [(task, self._wait_ns(task)) for task in tasks]
        if tasks and all(wait is None for _, wait in waits):
            self.measures = WALL_CLOCK  # no schedstat on this kernel
            return
        for task, wait in waits:
            if wait is None:
                continue  # it ended between the listing and the read
            before = self._waits.get(task, 0)
            grown += wait - before if wait >= before else wait  # a reused id is a new task
            self._waits[task] = wait
        self.stalled_s += min(grown / 1e9, max(since, 0.0))

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

    def _wait_ns(self, task: str) -> int | None:
        pid, tid = task.split("/")
        fields = self._read_ints(self._proc / pid / "task" / tid / "schedstat")
        return fields[1] if len(fields) >= 2 else None

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
