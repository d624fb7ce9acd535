"""Per-run cgroups: one process budget, one memory budget and one CPU quota for a sandbox's
whole tree, and the count of the CPU time it used.

RLIMIT_NPROC counts every process of a uid and RLIMIT_AS and RLIMIT_CPU bound one process, so
none keeps one run from starving another, ten processes from using ten times the memory limit
or fifteen busy ones from holding every CPU of the machine. `RunCgroup.create` makes a fresh
cgroup per run for the `pids`, `memory` and `cpu` controllers, wherever this machine mounts
them (cgroup v1, v2, or the hybrid of both), under the cgroup we already run in, and sets
`pids.max`, the memory limit and the CPU quota (v1 `cpu.cfs_quota_us`, v2 `cpu.max`) there,
plus one for v1's `cpuacct`, which limits nothing but counts (on v2 every cgroup counts); the
launcher moves the program into it before exec. After the run `usage` reads what the kernel
counted (OOM kills, forks refused at the limit, peak memory, periods the quota held the run
back, the CPU time of all its processes, those killed with its PID namespace included) so the
outcome comes from what happened, and `remove` kills whatever is left and deletes the
directories. A controller that cannot be used here (not mounted, not delegated to us, not
writable) is named in `missing` with the reason, for the warnings. Cgroups of callers that died
(SIGKILL leaves no time to clean up) are removed by the next run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

# "cpuacct" limits nothing: it counts the run's CPU time (v1 `cpuacct.usage`; on v2 the
# `cpu.stat` every cgroup has, with or without the cpu controller).
CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
CPU_PERIOD_US = 100_000  # the quota is this much CPU time per period, times the share
_PREFIX = "agentbench-sandbox-"
_REMOVE_TRIES = 50
_REMOVE_PAUSE_S = 0.02


@dataclass(frozen=True)
class CgroupUsage:
    """What the kernel counted for one run's cgroup."""

    oom_kills: int = 0  # processes the memory limit killed
    process_limit_hits: int = 0  # forks and threads refused at pids.max
    peak_memory_bytes: int | None = None
    cpu_throttled: int = 0  # periods in which the CPU quota held the run back
    cpu_seconds: float | None = None  # CPU time of all the run's processes, ended or killed


@dataclass
class RunCgroup:
    """One run's cgroup directories, by controller."""

    dirs: dict[str, Path] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # controller → why not used

    @classmethod
    def create(cls, *, memory_bytes: int, max_processes: int, cpu_share: float) -> RunCgroup:
        """A fresh cgroup per available controller, with its limit set. Never raises."""
        run = cls()
        pid = os.getpid()
        name = f"{_PREFIX}{pid}-{_start_time(pid)}-{uuid.uuid4().hex[:8]}"
        quota_us = max(round(cpu_share * CPU_PERIOD_US), 1_000)  # the kernel's least is 1 ms
        limits = {"memory": memory_bytes, "pids": max_processes, "cpu": quota_us}
        for controller in CONTROLLERS:
            try:
                parent, version = _parent_for(controller)
                _sweep_stale(parent)
                directory = parent / name
                with contextlib.suppress(FileExistsError):  # v1 controllers may share one
                    directory.mkdir()
                if controller in limits:
                    _set_limit(directory, controller, version, limits[controller])
            except (OSError, _UnavailableError) as exc:
                run.missing[controller] = _reason(exc)
                continue
            run.dirs[controller] = directory
            run.versions[controller] = version
        return run

    def join_files(self) -> list[str]:
        """The `cgroup.procs` files to write the program's pid into, one per hierarchy."""
        return sorted({str(directory / "cgroup.procs") for directory in self.dirs.values()})

    def usage(self) -> CgroupUsage:
        memory, pids = self.dirs.get("memory"), self.dirs.get("pids")
        oom_kills, peak = 0, None
        if memory is not None:
            if self.versions["memory"] == 1:
                oom_kills = _counters(memory / "memory.oom_control").get("oom_kill", 0)
                peak = _number(memory / "memory.max_usage_in_bytes")
            else:
                oom_kills = _counters(memory / "memory.events").get("oom_kill", 0)
                peak = _number(memory / "memory.peak")
        hits = _counters(pids / "pids.events").get("max", 0) if pids is not None else 0
        cpu = self.dirs.get("cpu")
        throttled = _counters(cpu / "cpu.stat").get("nr_throttled", 0) if cpu is not None else 0
        return CgroupUsage(
            oom_kills=oom_kills,
            process_limit_hits=hits,
            peak_memory_bytes=peak,
            cpu_throttled=throttled,
            cpu_seconds=self._cpu_seconds(),
        )

    def _cpu_seconds(self) -> float | None:
        counted = self.dirs.get("cpuacct")
        if counted is None:
            return None
        if self.versions["cpuacct"] == 1:
            nanoseconds = _number(counted / "cpuacct.usage")
            return None if nanoseconds is None else nanoseconds / 1e9
        microseconds = _counters(counted / "cpu.stat").get("usage_usec")
        return None if microseconds is None else microseconds / 1e6

    def remove(self) -> None:
        """Kill anything still in the cgroups and delete them; gives up quietly if busy."""
        for directory in set(self.dirs.values()):
            _kill_and_remove(directory)


class _UnavailableError(Exception):
    """A controller this machine does not let us use."""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} ({exc.filename})" if exc.filename else exc.strerror
    return str(exc)


def _parent_for(controller: str) -> tuple[Path, int]:
    """Where our run's cgroup goes for `controller`: under our own cgroup, v1 or v2."""
    ours = _own_cgroups()
    mounts = _cgroup_mounts()
    for mount_point, root, fstype, options in mounts:
        if fstype == "cgroup" and controller in options:
            hierarchy = next((path for names, path in ours if controller in names), None)
            if hierarchy is None:
                break
            return _under(mount_point, root, hierarchy), 1
    for mount_point, root, fstype, _ in mounts:
        if fstype == "cgroup2":
            directory = _under(mount_point, root, dict(ours).get(frozenset(), "/"))
            if controller != "cpuacct":  # v2 counts CPU time in every cgroup
                _enable_v2(directory, controller)
            return directory, 2
    raise _UnavailableError(f"no cgroup hierarchy with the {controller} controller is mounted")


def _enable_v2(directory: Path, controller: str) -> None:
    available = (directory / "cgroup.controllers").read_text().split()
    if controller not in available:
        raise _UnavailableError(f"the {controller} controller is not delegated to {directory}")
    if controller in (directory / "cgroup.subtree_control").read_text().split():
        return
    try:
        (directory / "cgroup.subtree_control").write_text(f"+{controller}")
    except OSError as exc:
        # EBUSY: a cgroup that holds processes (ours does) cannot give its children
        # controllers, except the root; someone must delegate a subtree to us.
        raise _UnavailableError(
            f"cannot enable {controller} for {directory}'s children: {exc.strerror}"
        ) from None


def _own_cgroups() -> list[tuple[frozenset[str], str]]:
    """(controllers, path) per line of /proc/self/cgroup; v2's line has no controllers."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    own = []
    for line in lines:
        _, names, path = line.split(":", 2)
        own.append((frozenset(name for name in names.split(",") if name), path))
    return own


def _cgroup_mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root, fstype, super options) of every cgroup mount we can see."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            mount_point = fields[4].replace("\\040", " ")
            mounts.append((mount_point, fields[3], tail[0], set(tail[2].split(","))))
    return mounts


def _under(mount_point: str, root: str, path: str) -> Path:
    # A container may mount only its own subtree: paths are then relative to that root.
    if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root) :]
    directory = Path(mount_point) / path.lstrip("/")
    if not os.access(directory, os.W_OK):
        raise _UnavailableError(f"{directory} is not writable by us")
    return directory


def _set_limit(directory: Path, controller: str, version: int, value: int) -> None:
    if controller == "pids":
        (directory / "pids.max").write_text(str(value))
        return
    if controller == "cpu":
        if version == 1:
            (directory / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (directory / "cpu.cfs_quota_us").write_text(str(value))
        else:
            (directory / "cpu.max").write_text(f"{value} {CPU_PERIOD_US}")
        return
    if version == 1:
        (directory / "memory.limit_in_bytes").write_text(str(value))
        # Swap would let the tree exceed its budget; the file exists only with swap accounting.
        with contextlib.suppress(OSError):
            (directory / "memory.memsw.limit_in_bytes").write_text(str(value))
    else:
        (directory / "memory.max").write_text(str(value))
        with contextlib.suppress(OSError):
            (directory / "memory.swap.max").write_text("0")


def _counters(path: Path) -> dict[str, int]:
    counters = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                counters[key] = int(value)
    return counters


def _number(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _sweep_stale(parent: Path) -> None:
    """Remove the cgroups of callers that are gone (a SIGKILLed caller cleans nothing up).

    Their processes died with them (parent-death signals down the chain), so these are
    empty; one that is not stays, since `rmdir` refuses a busy cgroup.
    """
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if not entry.name.startswith(_PREFIX):
                continue
            pid, _, rest = entry.name[len(_PREFIX) :].partition("-")
            started = rest.partition("-")[0]
            if pid.isdigit() and _start_time(int(pid)) != started:
                with contextlib.suppress(OSError):
                    entry.rmdir()


def _start_time(pid: int) -> str:
    """When `pid` started, in clock ticks since boot; "" if it is gone. A reused pid differs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _kill_and_remove(directory: Path) -> None:
    for _ in range(_REMOVE_TRIES):
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
        _kill_members(directory)
        time.sleep(_REMOVE_PAUSE_S)


def _kill_members(directory: Path) -> None:
    kill_file = directory / "cgroup.kill"  # v2, Linux 5.14+: the kernel kills them all at once
    if kill_file.exists():
        with contextlib.suppress(OSError):
            kill_file.write_text("1")
            return
    with contextlib.suppress(OSError):
        for pid in (directory / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
