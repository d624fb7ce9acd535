"""The Python sandbox's lifetime: nothing outlives the call, not even a killed caller, and a
sandbox that cannot start the program says why as a system error, never as the code's fault.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import (
    LIMITS,
    no_stray_processes,  # noqa: F401  (autouse)
    per_run_budgets,  # noqa: F401  (by name)
    processes,
    run,
    sandbox_processes,
)

from agentbench import ResultKind
from agentbench.runtime.builtin import sandbox
from agentbench.runtime.builtin._sandbox_cgroup import CgroupUsage, RunCgroup
from agentbench.runtime.builtin._sandbox_outcome import _classify
from agentbench.runtime.builtin._sandbox_process import Capture, Watched
from agentbench.tools import SandboxLimits, SandboxOutcome, python_sandbox, sandbox_isolation


def _descendants(root: int) -> set[int]:
    table = processes()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (parent, _, _) in table.items() if parent in frontier}
        found |= frontier
    return found


@pytest.mark.usefixtures("per_run_budgets")
def test_killing_the_caller_leaves_no_sandbox_process_within_a_second() -> None:
    # The program starts a daemon in its own session and a grandchild, then sleeps far past
    # the moment its caller is SIGKILLed.
    program = textwrap.dedent(
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(120)
            time.sleep(120)
        print('ready', flush=True)
        time.sleep(120)
        """
    )
    caller_code = (
        "import sys\nfrom agentbench.tools import SandboxLimits, run_python\n"
        f"run_python({program!r}, SandboxLimits(timeout_s=60, cpu_seconds=60))\n"
    )
    parents = {d.parent for d in _spied_run("pass").dirs.values()}
    caller = subprocess.Popen([sys.executable, "-c", caller_code])
    try:
        deadline = time.monotonic() + 30
        # The launcher, init, the program, the daemon and its child.
        while len(tree := _descendants(caller.pid)) < 5:
            assert time.monotonic() < deadline, f"the sandbox never started: {tree}"
            time.sleep(0.05)
        in_cgroup = sandbox_processes(caller.pid, by_uid=False)
        assert len(in_cgroup) >= 3, in_cgroup  # the program, the daemon and its child
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        killed_at = time.monotonic()
        while (alive := set(processes()) & (tree | in_cgroup)) and time.monotonic() < killed_at + 1:
            time.sleep(0.01)
        assert not alive, f"alive 1 s after the caller was killed: {sorted(alive)}"
        print(f"sandbox gone {time.monotonic() - killed_at:.3f} s after the caller's SIGKILL")
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()

    # Its (empty) cgroups stay behind, since a dead caller cleans nothing; the next run
    # sweeps them.
    def left_behind() -> list[Path]:
        return [d for p in parents for d in p.glob(f"agentbench-sandbox-{caller.pid}-*")]

    assert len(left_behind()) == len(parents)
    run("pass")
    assert left_behind() == []


def _spied_run(code: str) -> RunCgroup:
    """Run `code`; the run's cgroups (removed by now) tell where they were made."""
    made: list[RunCgroup] = []
    original = RunCgroup.create

    def spy(**kwargs: Any) -> RunCgroup:
        made.append(original(**kwargs))
        return made[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunCgroup, "create", spy)
        run(code)
    return made[0]


def test_the_work_folder_lives_only_inside_the_sandbox() -> None:
    before = set(Path("/tmp").glob("agentbench-sandbox-*"))
    result = run("import os\nopen('note', 'w').write('x')\nprint(os.getcwd())")
    assert result.stdout == "/tmp/work\n"
    assert set(Path("/tmp").glob("agentbench-sandbox-*")) <= before


@pytest.mark.usefixtures("per_run_budgets")
def test_the_run_cgroups_are_removed_after_the_call() -> None:
    cgroup = _spied_run("import os, time\nif os.fork() == 0:\n    time.sleep(60)")
    assert cgroup.dirs
    assert all(not directory.exists() for directory in cgroup.dirs.values())


# --- a sandbox that cannot start is a system error -------------------------------------------


async def test_an_interpreter_missing_inside_is_a_system_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_plan = sandbox.plan_root

    def without_interpreter(*args: Any) -> dict[str, Any]:
        plan = real_plan(*args)
        plan["binds"] = [b for b in plan["binds"] if b == "/etc/ld.so.cache"]
        return plan

    if sandbox_isolation().isolation.get("filesystem") != "ok":
        pytest.skip("no minimal filesystem here")
    monkeypatch.setattr(sandbox, "plan_root", without_interpreter)
    result = sandbox.run_python("print(1)", LIMITS)
    assert result.outcome is SandboxOutcome.FAILED_TO_START, result
    assert "setup failed: FileNotFoundError" in result.message
    assert "exit" not in result.message and "125" not in result.message
    tool_result = await python_sandbox(LIMITS).invoke({"code": "print(1)"})
    assert tool_result.kind is ResultKind.SYSTEM_ERROR
    assert "FileNotFoundError" in (tool_result.error or "")


def test_a_cgroup_that_cannot_be_joined_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunCgroup, "join_files", lambda self: ["/nonexistent/cgroup.procs"])
    result = sandbox.run_python("print(1)", LIMITS)
    assert result.outcome is SandboxOutcome.FAILED_TO_START
    assert "/nonexistent/cgroup.procs" in result.message
    assert result.stdout == ""


def test_without_cgroups_the_shared_limits_are_warned_or_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    none_here = {"memory": "not mounted (test)", "pids": "not delegated (test)"}
    monkeypatch.setattr(RunCgroup, "create", classmethod(lambda cls, **_: cls(missing=none_here)))
    loose = sandbox.run_python("print(1)", LIMITS)
    assert loose.outcome is SandboxOutcome.OK
    assert loose.isolation["process_budget"] == "per user"
    assert any("memory limit per process only" in w for w in loose.warnings)
    assert any("concurrent sandboxes share it" in w for w in loose.warnings)
    strict = sandbox.run_python("print(1)", SandboxLimits(require_full_isolation=True))
    assert strict.outcome is SandboxOutcome.FAILED_TO_START
    assert "no per-run budget here" in strict.message


def test_a_start_that_outlasts_the_timeout_is_not_the_codes_fault() -> None:
    watched = Watched(Capture(100), Capture(100), {"launcher": {}}, killed_for="timeout")
    outcome, message = _classify(watched, CgroupUsage(), LIMITS, memory_per_run=True)
    assert outcome is SandboxOutcome.FAILED_TO_START
    assert "did not start the program" in message
