"""Real processes sharing one store: concurrent writers, a busy lock, and kill -9.

Each test starts its own subprocesses, waits for them with bounded timeouts and kills any
that are left, so nothing outlives the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

AGENT = Path(__file__).parent / "fixtures" / "trace_agent.py"
HOLD_LOCK = (
    "import duckdb, sys\n"
    "conn = duckdb.connect(sys.argv[1])\n"
    "print('locked', flush=True)\n"
    "sys.stdin.readline()\n"
    "conn.close()\n"
)
TIMEOUT_S = 60
CLI = [sys.executable, "-m", "agentbench", "traces"]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=TIMEOUT_S)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def spawn(
    processes: list[subprocess.Popen[str]], *args: str, stdin: bool = False
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    processes.append(process)
    return process


def read_until(process: subprocess.Popen[str], wanted: str) -> list[str]:
    """Lines the process printed up to and including `wanted` (bounded by TIMEOUT_S)."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(
                f"process ended before {wanted!r}; stderr: {process.stderr.read()}"
            )
        lines.append(line.strip())
        if line.strip() == wanted:
            return lines
    raise AssertionError(f"no {wanted!r} within {TIMEOUT_S} s")


def spawn_logged(
    processes: list[subprocess.Popen[str]], log: Path, *args: str
) -> subprocess.Popen[str]:
    """A process whose output goes to `log`, so it can be read while it runs and after."""
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    processes.append(process)
    return process


def wait_for_lines(log: Path, prefix: str, count: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if sum(line.startswith(prefix) for line in log.read_text().splitlines()) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{log.name}: fewer than {count} {prefix!r} lines: {log.read_text()}")


def finished_ids(output: str) -> list[str]:
    return [line.split()[1] for line in output.splitlines() if line.startswith("finished ")]


def test_two_writers_and_a_reader_while_the_lock_is_held_elsewhere(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "traces.duckdb"
    holder = spawn(processes, "-c", HOLD_LOCK, str(db), stdin=True)
    read_until(holder, "locked")
    logs = [tmp_path / f"writer{i}.log" for i in range(2)]
    writers = [
        spawn_logged(processes, log, str(AGENT), str(db), "finish", "25", "0.002") for log in logs
    ]
    reader = spawn(processes, "-m", "agentbench", "traces", "list", "--db", str(db), "--wait", "60")
    assert reader.stderr is not None
    busy = reader.stderr.readline()
    assert "is busy" in busy and "waiting up to 60 s" in busy

    # Both writers keep finishing runs while they cannot write the store: the runs wait in
    # their journals.
    for log in logs:
        wait_for_lines(log, "finished ", 5)
    assert len(list((tmp_path / "traces.duckdb.spool").glob("*.journal"))) == 2
    assert holder.stdin is not None
    holder.stdin.write("release\n")
    holder.stdin.flush()
    holder.wait(timeout=TIMEOUT_S)

    codes = [w.wait(timeout=TIMEOUT_S) for w in writers]
    outputs = [log.read_text() for log in logs]
    assert codes == [0, 0], outputs
    reader_out, reader_err = reader.communicate(timeout=TIMEOUT_S)
    assert reader.returncode == 0, reader_err
    assert "RUN_ID" in reader_out or "no runs match" in reader_out

    expected = {run_id for out in outputs for run_id in finished_ids(out)}
    assert len(expected) == 50
    stored = {run.run_id: run for run in TraceStore(db).runs()}
    assert set(stored) == expected
    assert {run.status for run in stored.values()} == {"completed"}
    assert all(run.llm_calls == 2 and run.tool_calls == 1 for run in stored.values())
    assert not list((tmp_path / "traces.duckdb.spool").glob("*.journal"))


def test_a_reader_gives_up_clearly_when_the_store_stays_busy(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "traces.duckdb"
    holder = spawn(processes, "-c", HOLD_LOCK, str(db), stdin=True)
    read_until(holder, "locked")
    done = subprocess.run(
        [*CLI, "list", "--db", str(db), "--wait", "0.3"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 3
    assert f"trace store {db} is busy: PID {holder.pid}" in done.stderr
    assert "gave up after waiting 0.3 s" in done.stderr


def test_kill_9_keeps_finished_runs_and_marks_started_ones_incomplete(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "traces.duckdb"
    agent = spawn(processes, str(AGENT), str(db), "crash", "12")
    lines = read_until(agent, "hanging")
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=TIMEOUT_S)

    finished = finished_ids("\n".join(lines))
    started = [line.split()[1] for line in lines if line.startswith("started ")]
    assert len(finished) == 12 and len(started) == 3
    assert list((tmp_path / "traces.duckdb.spool").glob("*.journal"))  # left by the dead process

    runs = {run.run_id: run for run in TraceStore(db).runs()}
    assert set(runs) == {*finished, *started}
    assert {runs[r].status for r in finished} == {"completed"}
    assert {runs[r].status for r in started} == {"incomplete"}
    assert {runs[r].agent for r in started} == {"stuck"}
    assert all(runs[r].stop_reason is None and runs[r].finished_at is None for r in started)
    assert not list((tmp_path / "traces.duckdb.spool").glob("*.journal"))  # ingested once

    shown = subprocess.run(
        [*CLI, "list", "--db", str(db), "--status", "incomplete"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert sorted(line.split()[0] for line in shown.stdout.splitlines()[1:4]) == sorted(started)


FORKS_WHILE_KEPT = """
import os, sys, time
from agentbench import Agent, Runner, ScriptedModel
from agentbench.trace import StoreBusyError, TraceStore
from agentbench.trace.storage import database

def one_run(store):
    return Runner.run_sync(Agent(name="a"), "hi", model=ScriptedModel(["done"]), store=store)

store = TraceStore(sys.argv[1])
parents = one_run(store).run_id
deadline = time.monotonic() + 60
while not database.is_kept(store.path) and time.monotonic() < deadline:
    time.sleep(0.005)
assert database.is_kept(store.path), "the ingest thread did not keep its connection"
pid = os.fork()
if pid == 0:
    try:
        child = TraceStore(sys.argv[1], wait_s=0.3, exit_wait_s=0.3)
        print("child-run", one_run(child).run_id, flush=True)
        try:
            child.flush()
        except StoreBusyError as exc:
            print("busy", exc, flush=True)
        child.close()
    finally:
        os._exit(0)
_, status = os.waitpid(pid, 0)
print("child-exit", os.waitstatus_to_exitcode(status), flush=True)
print("parent", parents, flush=True)
store.close()
"""


def test_a_child_forked_while_the_store_is_kept_open_waits_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """The child cannot open the file its parent has open (DuckDB's memory came along), nor
    close the parent's connection (its threads did not: the child would abort). It says the
    store is busy, not damaged, and its run is stored from its journal after it exits."""
    db = tmp_path / "traces.duckdb"
    done = subprocess.run(
        [sys.executable, "-c", FORKS_WHILE_KEPT, str(db)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["child-exit"] == "0"  # not killed by an abort
    assert "forked from" in lines["busy"] and "damaged" not in done.stdout + done.stderr
    stored = {run.run_id for run in TraceStore(db).runs()}
    assert stored == {lines["parent"], lines["child-run"]}
