"""The SQL tool's time limit measures the query, not the machine.

A loaded machine slows a query without making it do more: waiting for a CPU, starting a worker
process (python and duckdb imported) and a late look at the clock must not turn a query that
passes into one that timed out. So a query on a database file is judged by the CPU time it
used, starting a worker never counts, and the wall clock is only a much longer backstop for a
query that makes no progress. A starved machine is played here without racing sleeps: a clock
that jumps (the pool's view of the wall clock), a worker stopped with SIGSTOP (no CPU at all
while wall time passes), cursors that burn CPU or block until they are interrupted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from agentbench import ResultKind, ToolResult
from agentbench.errors import UsageError
from agentbench.runtime.builtin import _sql_process, _sql_worker
from agentbench.runtime.builtin._sql_process import WorkerPool
from agentbench.tools import sql_query

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"), pytest.mark.slow]

# md5 over a million rows of a ten-row table joined with itself: about half a second of CPU.
BUSY = "SELECT count(DISTINCT md5(a.note || b.note || c.note || d.note || e.note || f.id)) AS n "
BUSY += "FROM notes AS a, notes AS b, notes AS c, notes AS d, notes AS e, notes AS f"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER, note VARCHAR)")
        conn.execute("INSERT INTO notes SELECT i, 'note ' || i FROM range(10) AS t(i)")
    return path


async def ask(tool: Any, query: str) -> ToolResult:
    return await tool.invoke({"query": query})


class LateClock:
    """The pool's `time`: the real clock plus `late` seconds, which a test adds to play a
    machine that kept the caller waiting."""

    def __init__(self) -> None:
        self.late = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.late


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> LateClock:
    late = LateClock()
    monkeypatch.setattr(_sql_process, "time", late)
    return late


def workers_of(database: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"_sql_worker.py" in command and str(database).encode() in command:
            found.append(int(entry.name))
    return found


def resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it was killed meanwhile
        os.kill(pid, signal.SIGCONT)


# --- what a loaded machine does to the caller ------------------------------------------------


async def test_a_worker_start_that_takes_an_hour_does_not_eat_the_querys_limit(
    notes: Path, clock: LateClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = sql_query(notes, timeout_s=0.5)
    for pid in workers_of(notes):  # the next query has to start a worker of its own
        os.kill(pid, signal.SIGKILL)
    real_start = _sql_process._Worker.__init__

    def slow_start(worker: Any, settings: dict[str, Any]) -> None:
        real_start(worker, settings)
        clock.late += 3600  # python and duckdb imported on a starved machine

    monkeypatch.setattr(_sql_process._Worker, "__init__", slow_start)
    result = await ask(tool, "SELECT count(*) AS n FROM notes")
    assert result.kind is ResultKind.OK and result.data["rows"] == [[10]]
    assert clock.late >= 3600  # a worker was started while the query waited


async def test_setup_and_queries_are_not_judged_by_a_late_callers_clock(
    notes: Path, clock: LateClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every answer of a worker reaches the caller 10 s late: past the old 5 s per-call limit
    # the catalog read at construction went through, and past the query's own limit.
    real_read = _sql_process._Worker.read_reply

    def late_read(worker: Any, deadline: float) -> dict[str, Any]:
        clock.late += 10
        return real_read(worker, deadline)

    monkeypatch.setattr(_sql_process._Worker, "read_reply", late_read)
    tool = sql_query(notes, timeout_s=0.5)
    assert " notes(" in tool.description
    result = await ask(tool, "SELECT max(id) AS top FROM notes")
    assert result.kind is ResultKind.OK and result.data["rows"] == [[9]]


def cpu_ticks(pid: int) -> int:
    """The CPU time process `pid` has used, in clock ticks (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def test_a_worker_starved_in_the_middle_of_a_query_still_answers(
    notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SIGSTOP is the worst a loaded machine can do: no CPU at all while the wall clock runs
    # on, here for longer than the query's whole time limit.
    tool = sql_query(notes, timeout_s=1.5)
    real_hand_over = WorkerPool._hand_over
    stopped: list[int] = []

    def starve(worker: Any, request: dict[str, Any], hang_after_s: float) -> None:
        pid = worker.process.pid
        before = cpu_ticks(pid)
        real_hand_over(worker, request, hang_after_s)
        given_up = time.monotonic() + 60
        while cpu_ticks(pid) < before + os.sysconf("SC_CLK_TCK") // 20:
            # Until the query has used 50 ms of CPU: it is running (it needs about 400).
            assert time.monotonic() < given_up, "the query never used 50 ms of CPU"
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)
        threading.Timer(2.5, resume, (pid,)).start()

    monkeypatch.setattr(WorkerPool, "_hand_over", staticmethod(starve))
    result = await ask(tool, BUSY)
    assert stopped
    assert result.kind is ResultKind.OK, result.error
    assert result.data["rows"] == [[10**6]]


# --- what still stops a query ------------------------------------------------------------------


async def test_a_query_that_uses_more_cpu_than_its_limit_is_interrupted(notes: Path) -> None:
    tool = sql_query(notes, timeout_s=0.1)
    result = await ask(tool, BUSY)
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "interrupted after 0.1 s of CPU time (time limit)" in (result.error or "")
    again = await ask(tool, "SELECT count(*) AS n FROM notes")  # the worker is still usable
    assert again.data["rows"] == [[10]]


async def test_the_kernels_cpu_stop_reads_as_the_querys_timeout(
    notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = sql_query(notes, timeout_s=2)
    real_hand_over = WorkerPool._hand_over
    limits: list[str] = []

    def past_the_grace(worker: Any, request: dict[str, Any], hang_after_s: float) -> None:
        real_hand_over(worker, request, hang_after_s)
        limits.append(Path(f"/proc/{worker.process.pid}/limits").read_text())
        # What RLIMIT_CPU sends a query that goes on a grace past its limit, deaf to the
        # interrupt (a scalar function working on one huge value).
        os.kill(worker.process.pid, signal.SIGXCPU)

    monkeypatch.setattr(WorkerPool, "_hand_over", staticmethod(past_the_grace))
    result = await ask(tool, BUSY)
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "interrupted after 2 s of CPU time (time limit)" in (result.error or "")
    cpu_line = next(line for line in limits[0].splitlines() if line.startswith("Max cpu time"))
    assert cpu_line.split()[3] != "unlimited", cpu_line  # the kernel's backstop was set


def test_a_wall_timeout_that_is_not_positive_is_refused(notes: Path) -> None:
    with pytest.raises(UsageError, match="wall_timeout_s must be positive"):
        sql_query(notes, wall_timeout_s=0)


# --- the worker's own judgement, with cursors that stand in for the engine ----------------------


class Cursor:
    """A cursor whose query burns `cpu_s` of CPU, or waits `off_cpu_s` off the CPU, or
    (neither) blocks until it is interrupted; an interrupt ends any of them with an error."""

    def __init__(self, cpu_s: float = 0.0, off_cpu_s: float | None = None) -> None:
        self.cpu_s, self.off_cpu_s = cpu_s, off_cpu_s
        self.interrupted = threading.Event()
        self.description: list[tuple[str]] | None = None
        self._rows = [(1,)]

    def execute(self, sql: str) -> None:
        if self.cpu_s:
            until = time.process_time() + self.cpu_s
            while time.process_time() < until:
                if self.interrupted.is_set():
                    raise RuntimeError("INTERRUPT Error: Interrupted!")
        elif self.interrupted.wait(self.off_cpu_s):
            raise RuntimeError("INTERRUPT Error: Interrupted!")
        self.description = [("one",)]

    def fetchmany(self, size: int) -> list[tuple[int]]:
        rows, self._rows = self._rows, []
        return rows

    def interrupt(self) -> None:
        self.interrupted.set()

    def close(self) -> None:
        pass


class Connection:
    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor

    def cursor(self) -> Cursor:
        return self._cursor


@pytest.fixture
def run_one() -> Any:
    """`_sql_worker.run_one` on a stand-in cursor, in this process."""

    def run(cursor: Cursor, cpu_limit_s: float | None, hang_after_s: float = 60) -> dict:
        request = {
            "sql": "SELECT 1 AS one",
            "max_rows": 10,
            "max_bytes": 1000,
            "cpu_limit_s": cpu_limit_s,
            "hang_after_s": hang_after_s,
        }
        return _sql_worker.run_one(Connection(cursor), request)

    return run


def test_time_off_the_cpu_is_not_the_querys(run_one: Any) -> None:
    reply = run_one(Cursor(off_cpu_s=0.3), cpu_limit_s=0.1)
    assert reply == {"columns": ["one"], "rows": [[1]], "truncated": None}


def test_cpu_time_past_the_limit_is_interrupted(run_one: Any) -> None:
    cursor = Cursor(cpu_s=30)
    reply = run_one(cursor, cpu_limit_s=0.05)
    assert reply["timed_out"] == "cpu" and reply["cpu_s"] > 0.05
    assert cursor.interrupted.is_set()


def test_the_verdict_is_the_cpu_used_however_late_the_watcher_looks(
    run_one: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sql_worker, "_WATCH_POLL_S", 3600.0)  # it never looks in time
    cursor = Cursor(cpu_s=0.2)
    reply = run_one(cursor, cpu_limit_s=0.05)
    assert not cursor.interrupted.is_set()  # the query ran to its end...
    assert reply["timed_out"] == "cpu"  # ...and had used more than its limit


def test_a_blocked_query_is_stopped_by_the_wall_clock(run_one: Any) -> None:
    cursor = Cursor()
    reply = run_one(cursor, cpu_limit_s=5, hang_after_s=0.05)
    assert reply["timed_out"] == "hang" and cursor.interrupted.is_set()


def test_our_own_queries_have_no_cpu_limit(run_one: Any) -> None:
    reply = run_one(Cursor(cpu_s=0.2), cpu_limit_s=None)
    assert reply["rows"] == [[1]]
