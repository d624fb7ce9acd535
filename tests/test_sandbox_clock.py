"""The sandbox's time limit measures the program, not the machine.

Its clock starts when the program does (the sandbox's start-up is not the program's) and
leaves out the time the program's processes waited for a CPU, so a loaded machine cannot turn
a program that passed into one that timed out; a program that sleeps or blocks is charged as
before, and a wall-clock backstop still stops one the machine never lets run. The accounting
is checked on a /proc written by the test and a clock it moves by hand; then on real sandboxes:
a start held back with SIGSTOP, and a program crowded off its CPU by busy processes of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agentbench.runtime.builtin import _sandbox_process
from agentbench.runtime.builtin._sandbox_clock import OWN_TIME, WALL_CLOCK, ProgramClock
from agentbench.tools import SandboxLimits, SandboxOutcome, run_python

TICKS = os.sysconf("SC_CLK_TCK")
INIT, PROGRAM, CHILD = 10, 11, 12


class Proc:
    """A /proc with the sandbox's init, its program and what they start, and a clock."""

    def __init__(self, root: Path, *, children_files: bool = True) -> None:
        self.root = root
        self.now = 100.0  # seconds since boot
        self.children_files = children_files
        self.process(INIT, started=90.0, children=[])

    def process(self, pid: int, *, started: float, children: list[int]) -> None:
        task = self.root / str(pid) / "task" / str(pid)
        task.mkdir(parents=True, exist_ok=True)
        rest = ["S"] + ["0"] * 18 + [str(round(started * TICKS))] + ["0"] * 30
        (self.root / str(pid) / "stat").write_text(f"{pid} (python3) {' '.join(rest)}\n")
        if self.children_files:
            (task / "children").write_text("".join(f"{c} " for c in children))
        self.wait(pid, 0.0)

    def wait(self, pid: int, waited_s: float) -> None:
        """The run-queue wait task `pid` has accumulated so far."""
        schedstat = self.root / str(pid) / "task" / str(pid) / "schedstat"
        schedstat.write_text(f"1000 {round(waited_s * 1e9)} 3\n")

    def end(self, pid: int) -> None:
        for path in sorted((self.root / str(pid)).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (self.root / str(pid)).rmdir()


def make_clock(proc: Proc, timeout_s: float = 2.0, wall_timeout_s: float = 60.0) -> ProgramClock:
    return ProgramClock(
        timeout_s=timeout_s,
        wall_timeout_s=wall_timeout_s,
        start_timeout_s=300.0,
        proc=proc.root,
        now=lambda: proc.now,
    )


def start(proc: Proc, clock: ProgramClock, *, at: float) -> None:
    proc.process(PROGRAM, started=at, children=[])
    (proc.root / str(INIT) / "task" / str(INIT) / "children").write_text(f"{PROGRAM} ")
    clock.saw({"forked": {"pid": INIT}, "started": {}})


def test_the_sandboxs_start_is_not_the_programs_time(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    clock.saw({"forked": {"pid": INIT}})
    proc.now += 250  # the launcher, the namespaces and two interpreters, on a starved machine
    assert clock.over() is None
    start(proc, clock, at=proc.now - 0.5)  # the program began half a second ago
    assert clock.over() is None
    proc.now += 1.6
    assert clock.over() == "timeout"  # 2.1 s of its own


def test_a_start_that_never_ends_is_stopped(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    clock.saw({"forked": {"pid": INIT}})
    proc.now += 301
    assert clock.over() == "start"


def test_waiting_for_a_cpu_is_not_counted(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    start(proc, clock, at=proc.now)
    for second in range(1, 9):  # 8 s of wall clock, of which the program ran 1
        proc.now += 1
        proc.wait(PROGRAM, second * 0.875)
        assert clock.over() is None
    assert clock.program_time() == pytest.approx(1.0)
    assert clock.measures == OWN_TIME


def test_sleeping_is_counted(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    start(proc, clock, at=proc.now)
    proc.now += 1.0
    assert clock.over() is None
    proc.now += 1.5  # no CPU wait: the program slept, or blocked
    assert clock.over() == "timeout"


def test_tasks_waiting_at_once_count_no_more_than_the_time_that_passed(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc, timeout_s=2.0)
    proc.process(CHILD, started=proc.now, children=[])
    start(proc, clock, at=proc.now)
    (proc.root / str(PROGRAM) / "task" / str(PROGRAM) / "children").write_text(f"{CHILD} ")
    proc.now += 1.0
    proc.wait(PROGRAM, 1.0)  # both waited the whole second: one second of stall, not two
    proc.wait(CHILD, 1.0)
    assert clock.over() is None and clock.program_time() == pytest.approx(0.0)
    proc.now += 1.9  # then they sleep
    assert clock.over() is None
    proc.now += 0.2
    assert clock.over() == "timeout"


def test_a_task_that_ended_keeps_its_waits(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    proc.process(CHILD, started=proc.now, children=[])
    start(proc, clock, at=proc.now)
    (proc.root / str(PROGRAM) / "task" / str(PROGRAM) / "children").write_text(f"{CHILD} ")
    proc.now += 3
    proc.wait(CHILD, 2.5)
    assert clock.over() is None
    proc.end(CHILD)
    proc.now += 0.5
    assert clock.over() is None
    assert clock.program_time() == pytest.approx(1.0)


def test_the_wall_clock_backstop_still_stops_a_starved_program(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc, timeout_s=2.0, wall_timeout_s=20.0)
    start(proc, clock, at=proc.now)
    for second in range(1, 22):
        proc.now += 1
        proc.wait(PROGRAM, float(second))  # it never gets a CPU at all
        if clock.over() is not None:
            break
    assert clock.over() == "wall" and proc.now == pytest.approx(121.0)


def test_without_task_children_the_limit_is_plain_wall_clock(tmp_path: Path) -> None:
    proc = Proc(tmp_path, children_files=False)
    clock = make_clock(proc)
    clock.saw({"forked": {"pid": INIT}, "started": {}})
    assert clock.measures == WALL_CLOCK
    proc.now += 2.1
    assert clock.over() == "timeout"


def resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it was killed meanwhile
        os.kill(pid, signal.SIGCONT)


# --- real sandboxes ----------------------------------------------------------------------------

pytestmark_linux = pytest.mark.skipif(sys.platform != "linux", reason="namespaces and /proc")
CROWDED = """
import os, signal, time
os.sched_setaffinity(0, {0})
busy = []
for _ in range(3):  # three busy processes on the program's one CPU: it gets a quarter of it
    pid = os.fork()
    if pid == 0:
        while True:
            pass
    busy.append(pid)
until = time.process_time() + 0.3
while time.process_time() < until:
    pass
for pid in busy:
    os.kill(pid, signal.SIGKILL)
print("done")
"""


@pytestmark_linux
def test_a_program_crowded_off_its_cpu_is_not_timed_out() -> None:
    # 0.3 s of CPU at a quarter of a CPU is over a second of wall clock: past 0.8 s.
    result = run_python(CROWDED, SandboxLimits(timeout_s=0.8))
    assert result.outcome is SandboxOutcome.OK, result
    assert result.stdout == "done\n"
    assert result.isolation["time_limit"] == OWN_TIME


@pytestmark_linux
def test_a_sandbox_start_held_back_does_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    real_send = _sandbox_process._send_code

    def held_back(process: Any, code: bytes) -> None:
        # The launcher gets no CPU for longer than the program's whole time limit.
        os.kill(process.pid, signal.SIGSTOP)
        threading.Timer(1.5, resume, (process.pid,)).start()
        real_send(process, code)

    monkeypatch.setattr(_sandbox_process, "_send_code", held_back)
    result = run_python("print('hello')", SandboxLimits(timeout_s=1))
    assert result.outcome is SandboxOutcome.OK, result
    assert result.stdout == "hello\n"


@pytestmark_linux
def test_a_program_crowded_for_ever_is_stopped_by_the_backstop() -> None:
    endless = CROWDED.replace("time.process_time() + 0.3", "float('inf')")
    limits = SandboxLimits(timeout_s=30, cpu_seconds=60, wall_timeout_s=1.5)
    result = run_python(endless, limits)
    assert result.outcome is SandboxOutcome.TIMEOUT, result
    assert result.message == (
        "did not finish within 1.5 s of wall-clock time; every process was killed"
    )
