"""benchmarks/serve_cpu.py, recording_cost.py's `--lengths` and cpu_clock.py measure what
they say: the FastAPI floor and `agentbench serve` give the same agent's answer to the
benchmark's small client, a server's CPU counts the processes it started, and the recording
process's CPU is read while it runs (it benchmarks nothing here: tiny loads, no timings
asserted)."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentbench.trace import TraceStore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import cpu_clock  # noqa: E402
import recording_cost  # noqa: E402
import serve_cpu  # noqa: E402
from counts import counts  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("server", ["fastapi", "serve"])
def test_both_servers_answer_the_benchmarks_client(server: str, tmp_path: Path) -> None:
    async def measured() -> tuple[float, float]:
        start = serve_cpu.start_fastapi if server == "fastapi" else serve_cpu.start_serve
        process, port = start(tmp_path) if server == "fastapi" else start(tmp_path, 2)  # type: ignore[call-arg]
        try:
            return await serve_cpu.measure(port, process.pid, 2, 10)
        finally:
            serve_cpu._stop(process)

    # `measure` raises if an answer is wrong. Ten requests may cost less than a clock tick
    # (10 ms) of CPU, so the figure may read 0 here: it is read, not judged.
    rate, cpu_ms = asyncio.run(measured())
    assert rate > 0 and cpu_ms >= 0


def test_a_servers_cpu_counts_the_processes_it_started() -> None:
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(1.5)
        # The parent sleeps: what it used is almost all its child's spinning.
        assert cpu_clock.process_cpu_s(parent.pid, children=True) > 0.5
        assert cpu_clock.process_cpu_s(parent.pid) < 0.5
    finally:
        for child in Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split():
            subprocess.run(["kill", child], check=False)
        parent.kill()
        parent.wait()


def test_the_recording_process_cpu_is_read_while_it_records(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=True)
    assert cpu_clock.recording_process_cpu(store) == 0.0  # not started yet
    store.start_recording()
    try:
        before = cpu_clock.recording_process_cpu(store)
        asyncio.run(recording_cost.run_all(20, 6, store))
        assert cpu_clock.recording_process_cpu(store) > before
        assert store.sql("SELECT count(*) FROM runs").rows[0][0] == 20
    finally:
        store.close()


def test_the_lengths_table_has_a_row_per_length(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(recording_cost.by_length([2, 5], 10, 1))
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    lengths = [row[0] for row in rows if row and row[0].isdigit()]
    assert lengths == ["2", "5"]


def test_a_mistyped_count_is_a_usage_error_naming_it() -> None:
    assert counts("1,2,8") == [1, 2, 8]
    for bad, said in (("1,x", "expected numbers"), ("0", "1 or more"), ("", "expected")):
        with pytest.raises(argparse.ArgumentTypeError, match=said):
            counts(bad)
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "serve_cpu.py"), "--clients", "two"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "--clients: 'two'" in run.stderr
    assert "Traceback" not in run.stderr
