"""Reader wait: how long `agentbench traces list` waits for the store while processes record.

    python benchmarks/reader_wait.py [--writers 1,2,4] [--reads 40] [--delay 0.0]

For each number of writers, that many processes record small runs (a tool-calling run with a
scripted model, no network) into one store as fast as they can; meanwhile this process reads
the store the way `traces list` does — a fresh `TraceStore`, `runs(limit=20)` — once every
100-250 ms, and times each read from the call to its answer. Printed per writer count: p50,
p99 and max of those reads, their ratio to the same reads of the same store with no writer
(the baseline, measured first in the same run), and how many runs the writers stored
meanwhile, and per second from their start to their stop (a fair reader must not stop the
writers, and writers taking turns must not leave the store idle).

Agent settings: the runtime's defaults, for the writers' agent (`Agent(name="shop",
tools=[lookup])`) and the one that seeds the baseline's store (`Agent(name="seed")`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from agentbench.trace import TraceStore

WRITER = """
import asyncio, sys
from agentbench import Agent, FunctionModel, Runner, ToolCall, tool
from agentbench.trace import TraceStore

@tool(effect="read_only")
def lookup(item: str) -> str:
    '''Look an item up.'''
    return f"{item} is in stock"

async def answer(request, info):
    await asyncio.sleep(DELAY)
    if request["messages"][-1]["role"] == "user":
        return ToolCall("lookup", {"item": "tea"})
    return "tea is in stock"

async def main():
    store = TraceStore(sys.argv[1], exit_wait_s=120)
    agent = Agent(name="shop", tools=[lookup])
    print("ready", flush=True)
    while sys.stdin.readline().strip() != "stop":
        await Runner.run(agent, "tea?", model=FunctionModel(answer), store=store)
        print("ok", flush=True)

asyncio.run(main())
"""


def start_writer(db: Path, delay_s: float) -> subprocess.Popen[str]:
    code = WRITER.replace("DELAY", repr(delay_s))
    return subprocess.Popen(
        [sys.executable, "-c", code, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


class Writers:
    """Writer processes that record a run each time they are told to, as fast as they can.

    Each writer gets a "go" line whenever it has finished a run, from a thread that pumps
    them, so they run back to back until `stop`.
    """

    def __init__(self, db: Path, count: int, delay_s: float) -> None:
        self.processes = [start_writer(db, delay_s) for _ in range(count)]
        for process in self.processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"
        self.finished = 0
        self._stop = False
        import threading

        self._threads = [
            threading.Thread(target=self._pump, args=(p,), daemon=True) for p in self.processes
        ]
        for thread in self._threads:
            thread.start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdin is not None and process.stdout is not None
        while not self._stop:
            process.stdin.write("go\n")
            process.stdin.flush()
            if process.stdout.readline().strip() != "ok":
                return
            self.finished += 1

    def stop(self) -> None:
        self._stop = True
        for thread in self._threads:
            thread.join(timeout=120)
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write("stop\n")
            process.stdin.close()
        for process in self.processes:
            process.wait(timeout=300)
            assert process.stdout is not None
            process.stdout.close()


def read_waits(db: Path, reads: int) -> list[float]:
    """Seconds each read took, reading like `traces list` does (a fresh store each time)."""
    waits = []
    for _ in range(reads):
        time.sleep(random.uniform(0.1, 0.25))
        started = time.perf_counter()
        TraceStore(db, wait_s=120, on_wait=lambda message: None).runs(limit=20)
        waits.append(time.perf_counter() - started)
    return waits


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def stored_runs(db: Path) -> int:
    return int(TraceStore(db).sql("SELECT count(*) FROM runs").rows[0][0])


async def seed(db: Path) -> None:
    """A store with some runs in it, so a read reads something."""
    from agentbench import Agent, Runner, ScriptedModel

    store = TraceStore(db)
    for _ in range(50):
        await Runner.run(Agent(name="seed"), "hi", model=ScriptedModel(["hello"]), store=store)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", default="1,2,4", help="writer counts, comma-separated")
    parser.add_argument("--reads", type=int, default=40, help="reads per writer count")
    parser.add_argument("--delay", type=float, default=0.0, help="model latency per call, s")
    args = parser.parse_args()
    counts = [int(n) for n in args.writers.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "traces.duckdb"
        asyncio.run(seed(db))
        baseline = read_waits(db, args.reads)
        base_p50 = statistics.median(baseline)
        print(
            f"reader wait, {datetime.now(UTC):%Y-%m-%d}, {os.cpu_count()} cores, "
            f"{args.reads} reads each"
        )
        print("  writers   p50 ms   p99 ms   max ms   p50/base  p99/base  runs stored (a second)")
        row = "  {:>7}  {:>7.1f}  {:>7.1f}  {:>7.1f}  {:>8.1f}x  {:>8.1f}x  {}"
        print(
            row.format(
                0,
                base_p50 * 1e3,
                percentile(baseline, 0.99) * 1e3,
                max(baseline) * 1e3,
                1.0,
                percentile(baseline, 0.99) / base_p50,
                "-",
            )
        )
        for count in counts:
            before = stored_runs(db)
            started = time.monotonic()
            writers = Writers(db, count, args.delay)
            time.sleep(1.0)  # let them get going
            waits = read_waits(db, args.reads)
            writers.stop()
            stored = stored_runs(db) - before
            rate = stored / (time.monotonic() - started)
            print(
                row.format(
                    count,
                    statistics.median(waits) * 1e3,
                    percentile(waits, 0.99) * 1e3,
                    max(waits) * 1e3,
                    statistics.median(waits) / base_p50,
                    percentile(waits, 0.99) / base_p50,
                    f"{stored} ({rate:.0f}/s)",
                )
            )


if __name__ == "__main__":
    main()
