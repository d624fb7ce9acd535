"""A run's CPU time from /proc, and the CPU quota's watch where no cgroup throttles the run.

`run_ticks` sums the CPU time every process under the sandbox's init has used: a living
process's own (utime + stime of all its threads) and that of the ended ones, which the kernel
adds to whoever reaped them (cutime + cstime, init's included). Each process is read before its
children are listed, so a child reaped meanwhile is counted once (or, until the next look, not
at all), never twice. The sandbox's init counts the run this way as the program ends, where no
cgroup counts it: the processes still running then are killed with the PID namespace, and the
kernel adds their CPU time to no one's rusage.

With a `cpu` cgroup (`_sandbox_cgroup`) the kernel holds a run's processes together to their
share of the CPUs and the watch is not used. Without one, RLIMIT_CPU bounds each process and
RLIMIT_NPROC their number, but fifteen busy processes would still hold every CPU of the machine
until the timeout. So `CpuQuotaWatch` reads `run_ticks` every 100 ms and says the run is over
its quota once that passes `share` CPUs over the program's time since it started plus a burst
of `BURST_S` seconds (so a program that starts a few processes for a moment is not stopped for
it). A run over it is stopped rather than slowed: that is the quota's mechanism here, and the
outcome says so. Where the kernel shows no task children there is nothing to watch and
`measures` says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BURST_S = 1.0  # CPU seconds a run may use above its share before it is stopped
WATCHED = "watched: a run over it is stopped, not slowed"
_LOOK_S = 0.1
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # per second


class CpuQuotaWatch:
    """Says when a run's processes together have used more than `share` CPUs (`over`)."""

    def __init__(
        self,
        share: float,
        *,
        proc: Path = Path("/proc"),
        now: Callable[[], float] = time.monotonic,
        burst_s: float = BURST_S,
    ) -> None:
        self.share = share
        self.burst_s = burst_s
        self.measures = WATCHED
        self.used_s = 0.0  # the run's CPU time at the last look
        self.elapsed_s = 0.0  # the program's wall-clock time at the last look
        self._proc = proc
        self._now = now
        self._init: int | None = None
        self._started: float | None = None
        self._looked: float | None = None

    def saw(self, records: dict[str, dict[str, Any]]) -> None:
        """Take in the launcher's report records read so far (`forked`, `started`)."""
        if self._init is None and isinstance(records.get("forked", {}).get("pid"), int):
            self._init = records["forked"]["pid"]
        if self._started is None and "started" in records:
            self._started = self._now()

    def over(self) -> bool:
        now = self._now()
        if self._init is None or self._started is None or self.measures != WATCHED:
            return False
        if self._looked is not None and now - self._looked < _LOOK_S:
            return False
        self._looked = now
        used = run_ticks(self._init, self._proc)
        if used is None:
            self.measures = "unavailable: the kernel shows no task children in /proc"
            return False
        # Never less than a look before: once init has ended, /proc holds only what it reaped,
        # not the processes killed with its PID namespace, and the last look is the run's.
        self.used_s = max(self.used_s, used / TICKS)
        self.elapsed_s = now - self._started
        return self.used_s > self.share * self.elapsed_s + self.burst_s


def run_ticks(init: int, proc: Path = Path("/proc")) -> int | None:
    """CPU ticks of every process under `init`, living or ended; None if it cannot say."""
    fields = _stat(proc, init)
    if fields is None:
        return 0  # init is gone: the run is over
    total = fields[2] + fields[3]  # what init reaped: orphans, and the program once ended
    pending = _children(proc, init)
    if pending is None:
        return None
    while pending:
        pid = pending.pop()
        fields = _stat(proc, pid)  # before its children are listed: see the module's docstring
        if fields is None:
            continue  # reaped meanwhile: its reaper's cutime has it from the next look
        total += sum(fields)
        pending.extend(_children(proc, pid) or ())
    return total


def own_ticks(pid: int, proc: Path = Path("/proc")) -> int | None:
    """CPU ticks `pid` used itself (all its threads), not its reaped children: what RLIMIT_CPU
    counts. A process that ended is still readable until it is reaped."""
    fields = _stat(proc, pid)
    return None if fields is None else fields[0] + fields[1]


def _stat(proc: Path, pid: int) -> tuple[int, int, int, int] | None:
    """utime, stime, cutime, cstime (fields 14-17 of /proc/PID/stat), in clock ticks."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    words = text.rsplit(")", 1)[1].split()  # the command name may hold ")" and spaces
    try:
        utime, stime, cutime, cstime = (int(word) for word in words[11:15])
    except ValueError:
        return None
    return utime, stime, cutime, cstime


def _children(proc: Path, pid: int) -> list[int] | None:
    """Children of all of `pid`'s threads; None where the kernel has no children files."""
    try:
        threads = os.listdir(proc / str(pid) / "task")
    except OSError:
        return []  # it ended meanwhile
    children: list[int] = []
    for tid in threads:
        path = proc / str(pid) / "task" / tid / "children"
        try:
            children += [int(word) for word in path.read_text().split()]
        except FileNotFoundError:
            if (proc / str(pid) / "task" / tid).exists():
                return None
        except (OSError, ValueError):
            continue
    return children
