"""The sandbox's time limit measures the program, not the machine.

Its clock starts when the program does (the sandbox's start-up is not the program's) and
leaves out the time the machine held the program back — its tasks waiting for a CPU while none
of them ran, while the rest of the machine used those CPUs — so a loaded machine cannot turn a
program that passed into one that timed out. Waits a program makes itself, by running more busy
processes than it has CPUs, are its own time; a program that sleeps or blocks is charged as
before, and a wall-clock backstop still stops one the machine never lets run. The accounting is
checked on a /proc written by the test and a clock it moves by hand; then on real sandboxes: a
start held back with SIGSTOP, a program crowded off its CPU by busy processes outside it, and
one that crowds its own CPU.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentbench.runtime.builtin import _sandbox_process
from agentbench.runtime.builtin._sandbox_clock import OWN_TIME, WALL_CLOCK, ProgramClock
from agentbench.tools import SandboxLimits, SandboxOutcome, run_python

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

TICKS = os.sysconf("SC_CLK_TCK")
INIT, PROGRAM, CHILD = 10, 11, 12


class Proc:
    """A /proc with the sandbox's init, its program and what they start, the machine's CPUs
    (`/proc/stat`: how long each has been busy), and a clock."""

    def __init__(
        self, root: Path, *, children_files: bool = True, machine: bool = True, cpus: int = 2
    ) -> None:
        self.root = root
        self.now = 100.0  # seconds since boot
        self.children_files = children_files
        self.machine = machine
        self.busy = [0.0] * cpus  # each CPU's busy time so far, anyone's tasks
        self.process(INIT, started=90.0, children=[])
        self.advance(0.0)

    def process(self, pid: int, *, started: float, children: list[int], cpus: str = "0-1") -> None:
        task = self.root / str(pid) / "task" / str(pid)
        task.mkdir(parents=True, exist_ok=True)
        rest = ["S"] + ["0"] * 18 + [str(round(started * TICKS))] + ["0"] * 30
        (self.root / str(pid) / "stat").write_text(f"{pid} (python3) {' '.join(rest)}\n")
        (task / "status").write_text(f"Name:\tpython3\nCpus_allowed_list:\t{cpus}\n")
        if self.children_files:
            (task / "children").write_text("".join(f"{c} " for c in children))
        self.wait(pid, 0.0)

    def wait(self, pid: int, waited_s: float, *, ran_s: float = 0.0) -> None:
        """The CPU time and run-queue wait task `pid` has accumulated so far."""
        schedstat = self.root / str(pid) / "task" / str(pid) / "schedstat"
        schedstat.write_text(f"{round(ran_s * 1e9)} {round(waited_s * 1e9)} 3\n")

    def advance(self, seconds: float, *, busy: float | list[float] = 0.0) -> None:
        """`seconds` pass, in which each CPU was busy `busy` of them (one value: every CPU)."""
        self.now += seconds
        each = busy if isinstance(busy, list) else [busy] * len(self.busy)
        self.busy = [total + more for total, more in zip(self.busy, each, strict=True)]
        if not self.machine:
            return
        lines = [
            f"cpu{n} {round(b * TICKS)} 0 0 {round((self.now - b) * TICKS)} 0 0 0 0 0 0"
            for n, b in enumerate(self.busy)
        ]
        whole = [sum(round(b * TICKS) for b in self.busy)] + [0] * 9
        (self.root / "stat").write_text(
            "\n".join([f"cpu  {' '.join(map(str, whole))}", *lines, "intr 0", ""])
        )

    def children(self, pid: int, *children: int) -> None:
        path = self.root / str(pid) / "task" / str(pid) / "children"
        path.write_text("".join(f"{c} " for c in children))

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


def start(proc: Proc, clock: ProgramClock, *, at: float, cpus: str = "0-1") -> None:
    proc.process(PROGRAM, started=at, children=[], cpus=cpus)
    proc.children(INIT, PROGRAM)
    clock.saw({"forked": {"pid": INIT}, "started": {}})


def test_the_sandboxs_start_is_not_the_programs_time(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    clock.saw({"forked": {"pid": INIT}})
    proc.advance(250, busy=250)  # the launcher, namespaces, two interpreters, a starved machine
    assert clock.over() is None
    start(proc, clock, at=proc.now - 0.5)  # the program began half a second ago
    assert clock.over() is None
    proc.advance(1.6)
    assert clock.over() == "timeout"  # 2.1 s of its own


def test_a_start_that_never_ends_is_stopped(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    clock.saw({"forked": {"pid": INIT}})
    proc.advance(301)
    assert clock.over() == "start"


@pytest.mark.parametrize("machine", [True, False], ids=["proc-stat", "no-proc-stat"])
def test_waiting_for_a_cpu_is_not_counted(tmp_path: Path, machine: bool) -> None:
    proc = Proc(tmp_path, machine=machine)
    clock = make_clock(proc)
    start(proc, clock, at=proc.now)
    for second in range(1, 9):  # 8 s of wall clock, of which the program ran 1
        proc.advance(1, busy=1)  # others had every CPU the rest of the time
        proc.wait(PROGRAM, second * 0.875, ran_s=second * 0.125)
        assert clock.over() is None
    assert clock.program_time() == pytest.approx(1.0)
    assert clock.measures == OWN_TIME


def test_sleeping_is_counted(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    start(proc, clock, at=proc.now)
    proc.advance(1.0)
    assert clock.over() is None
    proc.advance(1.5)  # no CPU wait: the program slept, or blocked
    assert clock.over() == "timeout"


def test_tasks_waiting_at_once_count_no_more_than_the_time_that_passed(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc, timeout_s=2.0)
    proc.process(CHILD, started=proc.now, children=[])
    start(proc, clock, at=proc.now)
    proc.children(PROGRAM, CHILD)
    proc.advance(1.0, busy=1.0)
    proc.wait(PROGRAM, 1.0)  # both waited the whole second: one second of stall, not two
    proc.wait(CHILD, 1.0)
    assert clock.over() is None and clock.program_time() == pytest.approx(0.0)
    proc.advance(1.9)  # then they sleep
    assert clock.over() is None
    proc.advance(0.2)
    assert clock.over() == "timeout"


def test_a_task_that_ended_keeps_its_waits(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc)
    proc.process(CHILD, started=proc.now, children=[])
    start(proc, clock, at=proc.now)
    proc.children(PROGRAM, CHILD)
    proc.advance(3, busy=3)
    proc.wait(CHILD, 2.5, ran_s=0.5)
    assert clock.over() is None
    proc.end(CHILD)
    proc.advance(0.5)
    assert clock.over() is None
    assert clock.program_time() == pytest.approx(1.0)


@pytest.mark.parametrize("machine", [True, False], ids=["proc-stat", "no-proc-stat"])
def test_waits_among_the_programs_own_busy_processes_are_its_time(
    tmp_path: Path, machine: bool
) -> None:
    # Four busy processes on two CPUs, nothing else running: each runs half the time and
    # waits the other half, for a CPU one of its siblings holds. Leaving those waits out let
    # such a program run for ever (the old clock took out the whole interval).
    proc = Proc(tmp_path, machine=machine)
    clock = make_clock(proc, timeout_s=2.0)
    busy = [PROGRAM, CHILD, CHILD + 1, CHILD + 2]
    for pid in busy[1:]:
        proc.process(pid, started=proc.now, children=[])
    start(proc, clock, at=proc.now)
    proc.children(PROGRAM, *busy[1:])
    for second in (1, 2):
        proc.advance(1, busy=1)  # both CPUs, by the program's own processes
        for pid in busy:
            proc.wait(pid, second * 0.5, ran_s=second * 0.5)
        assert clock.over() is None
    proc.advance(0.1, busy=0.1)
    assert clock.over() == "timeout"
    assert clock.program_time() == pytest.approx(2.1)


def test_a_parallel_program_slowed_by_others_is_charged_its_share(tmp_path: Path) -> None:
    # Two busy processes on two CPUs while others take half of each CPU: the program got one
    # CPU's worth of two, so half of each second was the machine's doing, not the program's.
    proc = Proc(tmp_path)
    clock = make_clock(proc, timeout_s=2.0)
    proc.process(CHILD, started=proc.now, children=[])
    start(proc, clock, at=proc.now)
    proc.children(PROGRAM, CHILD)
    for second in (1, 2, 3):
        proc.advance(1, busy=1)
        for pid in (PROGRAM, CHILD):
            proc.wait(pid, second * 0.5, ran_s=second * 0.5)
        assert clock.over() is None
    assert clock.program_time() == pytest.approx(1.5)


def test_crowding_in_bursts_between_sleeps_is_the_programs_time(tmp_path: Path) -> None:
    # Eight processes that wake together, crowd the two CPUs for a tenth of a second and sleep
    # the rest, within every look: their waits are many, but nobody else used the CPUs, so
    # nothing held the program back and its sleep is charged as sleep.
    proc = Proc(tmp_path)
    clock = make_clock(proc, timeout_s=2.0)
    busy = [PROGRAM, *range(CHILD, CHILD + 7)]
    for pid in busy[1:]:
        proc.process(pid, started=proc.now, children=[])
    start(proc, clock, at=proc.now)
    proc.children(PROGRAM, *busy[1:])
    for second in (1, 2):
        proc.advance(1, busy=0.2)
        for pid in busy:
            proc.wait(pid, second * 0.2, ran_s=second * 0.05)
        assert clock.over() is None
    proc.advance(0.1)
    assert clock.over() == "timeout"


def test_a_cpu_the_program_may_not_use_is_not_its_crowding(tmp_path: Path) -> None:
    # The program pins itself to CPU 0 and runs two busy processes there; others keep CPU 1
    # busy. The waits are the program's own: its one CPU was always running one of them.
    proc = Proc(tmp_path)
    clock = make_clock(proc, timeout_s=2.0)
    proc.process(CHILD, started=proc.now, children=[], cpus="0")
    start(proc, clock, at=proc.now, cpus="0")
    proc.children(PROGRAM, CHILD)
    for second in (1, 2):
        proc.advance(1, busy=1)
        for pid in (PROGRAM, CHILD):
            proc.wait(pid, second * 0.5, ran_s=second * 0.5)
        assert clock.over() is None
    proc.advance(0.1, busy=0.1)
    assert clock.over() == "timeout"


def test_the_wall_clock_backstop_still_stops_a_starved_program(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    clock = make_clock(proc, timeout_s=2.0, wall_timeout_s=20.0)
    start(proc, clock, at=proc.now)
    for second in range(1, 22):
        proc.advance(1, busy=1)
        proc.wait(PROGRAM, float(second))  # it never gets a CPU at all
        if clock.over() is not None:
            break
    assert clock.over() == "wall" and proc.now == pytest.approx(121.0)


def test_without_task_children_the_limit_is_plain_wall_clock(tmp_path: Path) -> None:
    proc = Proc(tmp_path, children_files=False)
    clock = make_clock(proc)
    clock.saw({"forked": {"pid": INIT}, "started": {}})
    assert clock.measures == WALL_CLOCK
    proc.advance(2.1, busy=2.1)
    assert clock.over() == "timeout"


def resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it was killed meanwhile
        os.kill(pid, signal.SIGCONT)


# --- real sandboxes ----------------------------------------------------------------------------

pytestmark_linux = pytest.mark.skipif(sys.platform != "linux", reason="namespaces and /proc")
ON_CPU_0 = "import os, sys, time\nos.sched_setaffinity(0, {0})\n"
HOG = ON_CPU_0 + "sys.stdout.write('x'); sys.stdout.flush()\nwhile True:\n    pass\n"
# 0.3 s of CPU on CPU 0; beside three busy processes there it gets a quarter of it.
WORK = (
    ON_CPU_0
    + """
until = time.process_time() + 0.3
while time.process_time() < until:
    pass
print("done")
"""
)
# Three processes of the program's own, 0.5 s of CPU each, on its one CPU: 1.5 s of its time.
OWN_CROWD = (
    ON_CPU_0
    + """
busy = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        until = time.process_time() + 0.5
        while time.process_time() < until:
            pass
        os._exit(0)
    busy.append(pid)
for pid in busy:
    os.waitpid(pid, 0)
print("done")
"""
)


@pytest.fixture
def cpu_0_crowded() -> Iterator[None]:
    """Three busy processes outside the sandbox on CPU 0, each running before the test does."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(3):
            hogs.append(subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE))
            assert hogs[-1].stdout is not None and hogs[-1].stdout.read(1) == b"x"
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
            assert hog.stdout is not None
            hog.stdout.close()


@pytestmark_linux
def test_a_program_crowded_off_its_cpu_is_not_timed_out(cpu_0_crowded: None) -> None:
    # 0.3 s of CPU at a quarter of a CPU is over a second of wall clock: past 0.8 s.
    result = run_python(WORK, SandboxLimits(timeout_s=0.8))
    assert result.outcome is SandboxOutcome.OK, result
    assert result.stdout == "done\n"
    assert result.isolation["time_limit"] == OWN_TIME


@pytestmark_linux
def test_a_program_that_crowds_its_own_cpu_is_timed_out() -> None:
    # Its processes wait for each other, not for the machine: 1.5 s of its time, past 0.8 s,
    # however busy the machine is (the old clock left those waits out and let it finish).
    result = run_python(OWN_CROWD, SandboxLimits(timeout_s=0.8))
    assert result.outcome is SandboxOutcome.TIMEOUT, result
    assert result.message.startswith(f"timed out after 0.8 s ({OWN_TIME})")


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
def test_a_program_crowded_for_ever_is_stopped_by_the_backstop(cpu_0_crowded: None) -> None:
    endless = WORK.replace("time.process_time() + 0.3", "float('inf')")
    limits = SandboxLimits(timeout_s=30, cpu_seconds=60, wall_timeout_s=1.5)
    result = run_python(endless, limits)
    assert result.outcome is SandboxOutcome.TIMEOUT, result
    assert result.message == (
        "did not finish within 1.5 s of wall-clock time; every process was killed"
    )
