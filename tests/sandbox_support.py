"""What the Python sandbox's test files share: small limits, outcome checks, and the guard
that no process of a sandbox outlives the test that started it.

A stray is a child of the test process, or any process still inside one of this process's
per-run cgroups (a daemon that left its session is still there); where the machine gives no
cgroups, any new process of the sandbox user. Other sessions' sandboxes, running at the same
time on the same machine, are neither.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentbench.tools import (
    SandboxLimits,
    SandboxOutcome,
    SandboxResult,
    run_python,
    sandbox_isolation,
)

LIMITS = SandboxLimits(
    timeout_s=20.0,  # roomy: under load the CPU limit, not the wall clock, must stop a loop
    cpu_seconds=2,
    memory_mb=256,
    file_size_mb=4,
    disk_mb=16,
    max_processes=16,
    max_open_files=32,
    max_output_chars=2_000,
    max_output_bytes=1_000_000,
)
AS_ROOT = os.geteuid() == 0
NOBODY = 65534

Check = Callable[[SandboxResult], None]


def run(code: str, limits: SandboxLimits = LIMITS) -> SandboxResult:
    return run_python(code, limits)


def raised(*names: str) -> Check:
    def check(result: SandboxResult) -> None:
        assert result.outcome is SandboxOutcome.ERROR, result
        assert any(name in result.message for name in names), result.message

    return check


def printed(expected: str) -> Check:
    def check(result: SandboxResult) -> None:
        assert result.outcome is SandboxOutcome.OK, result
        assert result.stdout.strip() == expected, result.stdout

    return check


def ended(outcome: SandboxOutcome) -> Check:
    def check(result: SandboxResult) -> None:
        assert result.outcome is outcome, result

    return check


def processes() -> dict[int, tuple[int, int, str]]:
    """pid → (parent pid, uid, cgroup lines) of every live process (zombies excluded)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
            cgroup = (entry / "cgroup").read_text()
        except OSError:
            continue
        # The command name may hold spaces; the fields after its ')' are fixed.
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if state == "Z":
            continue
        uid = next(int(line.split()[1]) for line in status.splitlines() if line[:4] == "Uid:")
        found[int(entry.name)] = (int(parent), uid, cgroup)
    return found


def sandbox_processes(caller: int, *, by_uid: bool) -> set[int]:
    """Processes that belong to sandboxes started by `caller`."""
    mark = f"agentbench-sandbox-{caller}-"
    table = processes()
    strays = {pid for pid, (parent, _, cgroup) in table.items() if mark in cgroup}
    strays |= {pid for pid, (parent, _, _) in table.items() if parent == caller}
    if by_uid:
        strays |= {pid for pid, (_, uid, _) in table.items() if uid == NOBODY}
    return strays


@pytest.fixture(autouse=True)
def no_stray_processes() -> Iterator[None]:
    """Whatever a test's program started must be gone when the test ends."""
    by_uid = AS_ROOT and not _has_cgroups()
    before = sandbox_processes(os.getpid(), by_uid=by_uid)
    yield
    deadline = time.monotonic() + 2.0  # the kernel reaps a dead PID namespace asynchronously
    while True:
        strays = sandbox_processes(os.getpid(), by_uid=by_uid) - before
        if not strays or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not strays, f"processes left behind: {sorted(strays)}"


@pytest.fixture
def per_run_budgets() -> None:
    if not _has_cgroups():
        pytest.skip("no per-run cgroups here: the limits are per process and per user")


def _has_cgroups() -> bool:
    return str(sandbox_isolation().isolation.get("process_budget")).startswith("per run")
