"""The sandbox's CPU quota: how many CPUs do many busy processes of one run hold?

    python benchmarks/sandbox_cpu_quota.py [--processes 15] [--busy 8] [--timeout 10]
                                           [--share 1] [--no-cgroup] [--json]

One `run_python` call starts `--processes` processes that busy-loop for `--busy` seconds of wall
clock and exit, and waits for them. Printed: how the run ended, its wall-clock time, the CPU
time its processes used (this process's children's rusage before and after: each process is
reaped by its parent up to the launcher, which we reap) and their ratio — the CPUs the run held
on average — next to the machine's CPU count. Without a quota the ratio is the machine's CPU
count; with one it is at most the share. A run that is stopped instead (`--no-cgroup`, the
fallback: a watch that stops a run over its share) is not in the rusage — the kernel reaps a
killed PID namespace's processes without accounting them — so its message carries the CPU
time the watch counted. `reported_cpu_s` is the run's CPU time as the sandbox reports it (its
cgroup's count, else what its init and the watch read in /proc), a stopped run's included.
The script runs against any version of the package (`PYTHONPATH=<an older checkout>`);
`--share` and `--no-cgroup` need the quota to exist.

It is a measurement: the exit code is 0 whatever it finds, 2 for a bad option.
"""

from __future__ import annotations

import argparse
import json
import os
import time

BUSY = (
    "import os, time\n"
    "end = time.monotonic() + {busy}\n"
    "for _ in range({n}):\n"
    "    if os.fork() == 0:\n"
    "        while time.monotonic() < end:\n"
    "            pass\n"
    "        os._exit(0)\n"
    "for _ in range({n}):\n"
    "    os.wait()\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=15)
    parser.add_argument("--busy", type=float, default=8.0, help="seconds each process loops")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--share", type=float, default=None, help="CPUs (default: the limit's)")
    parser.add_argument("--no-cgroup", action="store_true", help="measure the fallback watch")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import agentbench
    from agentbench.tools import SandboxLimits, run_python

    options: dict[str, object] = {"timeout_s": args.timeout, "max_processes": args.processes + 4}
    if args.share is not None:
        options["cpu_share"] = args.share
    if args.no_cgroup:
        _without_cpu_cgroup()
    throttled = _count_throttling()
    limits = SandboxLimits(**options)
    before, busy_before, started = os.times(), _machine_busy_s(), time.monotonic()
    result = run_python(BUSY.format(n=args.processes, busy=args.busy), limits)
    after, wall_s = os.times(), time.monotonic() - started
    machine_s = _machine_busy_s() - busy_before
    cpu_s = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    figures = {
        "package": os.path.dirname(agentbench.__file__),
        "processes": args.processes,
        "outcome": str(result.outcome),
        "message": result.message,
        "cpu_quota": result.isolation.get("cpu_quota", "(none)"),
        "wall_s": round(wall_s, 2),
        "cpu_s": round(cpu_s, 2),
        # The run's CPU time as the sandbox reports it (SandboxResult.cpu_seconds).
        "reported_cpu_s": None if result.cpu_seconds is None else round(result.cpu_seconds, 2),
        "cpus_held": round(cpu_s / wall_s, 2),
        "machine_cpus": os.cpu_count(),
        # Everyone's, the run's included: what was left to other work shows here.
        "machine_busy_cpus": round(machine_s / wall_s, 2),
        # The kernel's word that the quota held the run back: periods it was throttled in.
        "cpu_throttled_periods": throttled[-1] if throttled else "(no cpu cgroup)",
    }
    if args.json:
        print(json.dumps(figures))
        return
    for name, value in figures.items():
        print(f"{name:>21}: {value}")


def _machine_busy_s() -> float:
    """CPU time the whole machine has spent busy (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as stat:
        ticks = [int(word) for word in stat.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = ticks
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _count_throttling() -> list[int]:
    """Where the run has a cpu cgroup, the periods it was throttled in (read before removal)."""
    from agentbench.runtime.builtin import _sandbox_cgroup

    seen: list[int] = []
    usage = _sandbox_cgroup.RunCgroup.usage
    if not hasattr(_sandbox_cgroup.CgroupUsage(), "cpu_throttled"):
        return seen  # a version without the quota

    def counted(self: _sandbox_cgroup.RunCgroup) -> _sandbox_cgroup.CgroupUsage:
        found = usage(self)
        if "cpu" in self.dirs:
            seen.append(found.cpu_throttled)
        return found

    _sandbox_cgroup.RunCgroup.usage = counted  # type: ignore[method-assign]
    return seen


def _without_cpu_cgroup() -> None:
    from agentbench.runtime.builtin import _sandbox_cgroup

    original = _sandbox_cgroup.RunCgroup.create.__func__  # type: ignore[attr-defined]

    def create(cls: type, **limits: object) -> _sandbox_cgroup.RunCgroup:
        run = original(cls, **limits)
        directory = run.dirs.pop("cpu", None)
        if directory is not None:
            directory.rmdir()
            run.missing["cpu"] = "left out by --no-cgroup"
        return run

    _sandbox_cgroup.RunCgroup.create = classmethod(create)  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
