"""The run's CPU quota where no cgroup throttles it: a watch that stops a run over its share.

With a `cpu` cgroup (`_sandbox_cgroup`) the kernel holds a run's processes together to their
share of the CPUs and nothing here is used. Without one, RLIMIT_CPU bounds each process and
RLIMIT_NPROC their number, but fifteen busy processes would still hold every CPU of the machine
until the timeout. So `CpuQuotaWatch` reads, every 100 ms, the CPU time every process under
the sandbox's init has used — a living process's own (utime + stime of all its threads) and
that of the ended ones, which the kernel adds to whoever reaped them (cutime + cstime, init's
included) — and says the run is over its quota once that passes `share` CPUs over the
program's time since it started plus a burst of `BURST_S` seconds (so a program that starts a
few processes for a moment is not stopped for it). A run over it is stopped rather than slowed:
that is the quota's mechanism here, and the outcome says so. Each process is read before its
children are listed, so a child reaped meanwhile is counted once (or, until the next look,
not at all), never twice. Where the kernel shows no task children there is nothing to watch
and `measures` says so.
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
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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
        used = self._tree_ticks(self._init)
        if used is None:
            self.measures = "unavailable: the kernel shows no task children in /proc"
            return False
        self.used_s, self.elapsed_s = used / _TICKS, now - self._started
        return self.used_s > self.share * self.elapsed_s + self.burst_s

    def _tree_ticks(self, init: int) -> int | None:
        """CPU ticks of every process under `init`, living or ended; None if it cannot say."""
        fields = self._stat(init)
        if fields is None:
            return 0  # init is gone: the run is over
        total = fields[2] + fields[3]  # what init reaped: orphans, and the program once ended
        pending = self._children(init)
        if pending is None:
            return None
        while pending:
            pid = pending.pop()
            fields = self._stat(pid)  # before its children are listed: see the docstring
            if fields is None:
                continue  # reaped meanwhile: its reaper's cutime has it from the next look
            total += sum(fields)
            pending.extend(self._children(pid) or ())
        return total

    def _stat(self, pid: int) -> tuple[int, int, int, int] | None:
        """utime, stime, cutime, cstime (fields 14-17 of /proc/PID/stat), in clock ticks."""
        try:
            text = (self._proc / str(pid) / "stat").read_text()
        except OSError:
            return None
        words = text.rsplit(")", 1)[1].split()
        try:
            utime, stime, cutime, cstime = (int(word) for word in words[11:15])
        except ValueError:
            return None
        return utime, stime, cutime, cstime

    def _children(self, pid: int) -> list[int] | None:
        """Children of all of `pid`'s threads; None where the kernel has no children files."""
        try:
            threads = os.listdir(self._proc / str(pid) / "task")
        except OSError:
            return []  # it ended meanwhile
        children: list[int] = []
        for tid in threads:
            path = self._proc / str(pid) / "task" / tid / "children"
            try:
                children += [int(word) for word in path.read_text().split()]
            except FileNotFoundError:
                if (self._proc / str(pid) / "task" / tid).exists():
                    return None
            except (OSError, ValueError):
                continue
        return children
