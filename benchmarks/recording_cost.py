"""Recording cost: the same scripted runs with and without a `TraceStore`, end to end.

    python benchmarks/recording_cost.py [--runs 200] [--calls 6] [--repeat 5]
    python benchmarks/recording_cost.py --lengths 10,100,1000,10000 [--steps 20000]

`--lengths`: the cost per model call by session length, with the recording process's CPU
counted. For each length L, runs of L model calls (STEPS calls in all: STEPS / L runs) are
made unrecorded, recorded in this process and recorded in the recording process; printed are
microseconds of CPU per call for each and the ratios to unrecorded — the recording process's
as this process's CPU alone and as its CPU plus the recording process's (read from
`/proc/PID/stat`): what the machine pays. Recording is flat in session length when a row's
ratios do not grow with L. The runs are taken in turn, the best of REPEAT rounds kept.

A realistic small agent (two tools, a system prompt, several model calls a run, as a golden
case looks) is run RUNS times against a `ScriptedModel`, one `Runner.run` per run, the way the
harness runs cases: once with no store, once with `store=TraceStore(...).with_labels(...)`,
the clock stopping only after `store.flush()` has committed every row to DuckDB — recorded
in this process, and (where the store has it) in the store's recording process
(`recording_process=True`: runs only encode their events, a child process records them; its
start, while the store file is created, is not timed, its CPU not counted). The sides are
interleaved REPEAT times in one process (a fresh store file each time) and the medians
compared: printed are milliseconds per run for each and the ratio recorded / unrecorded, then
the ratios' spread over the repeats (a loaded machine moves them by tens of percent: compare
medians of several invocations) and where the recorded run's extra CPU went: the main thread
(the recorder, the journal, the flush) and the other threads (the ingest thread's DuckDB
work; sync tools run on worker threads in both).

Agent settings: the runtime's defaults, but for `Limits(max_iterations=40)` (with `--lengths`,
one more than the length), so a run of up to 40 model calls (`--calls`) is not stopped at the
default of 8.

Only APIs that exist before and after the performance work are used, so the same script
measures both (`PYTHONPATH=/tmp/before python benchmarks/recording_cost.py`). No timings are
asserted anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from counts import counts
from cpu_clock import recording_process_cpu

from agentbench import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
from agentbench.trace import TraceStore


@tool(effect="read_only")
def search(query: str, limit: int = 3) -> list[dict[str, Any]]:
    """Search the catalogue for products matching the query."""
    return [
        {"name": f"{query} #{i}", "price": 4.5 + i, "stock": 10 * i, "tags": ["tea", "loose"]}
        for i in range(limit)
    ]


@tool(effect="read_only")
def details(name: str) -> dict[str, Any]:
    """Full details of one product."""
    return {"name": name, "origin": "Darjeeling", "notes": "floral, light" * 4, "grams": 100}


def shop_agent(max_iterations: int = 40) -> Agent:
    return Agent(
        name="shop",
        instructions=(
            "You help customers choose teas from the catalogue. Search before answering, "
            "check the details of anything you recommend, and give prices in euros."
        ),
        tools=[search, details],
        limits=Limits(max_iterations=max_iterations),
    )


AGENT = shop_agent()


def script(calls: int, run: int) -> list[Any]:
    """`calls` model answers: tool calls (two per answer, alternating tools), then text."""
    answers: list[Any] = []
    for step in range(calls - 1):
        answers.append(
            [
                ToolCall("search", {"query": f"green tea {run}-{step}", "limit": 3}),
                ToolCall("details", {"name": f"sencha {run}-{step}"}),
            ]
        )
    answers.append(f"Three teas for run {run}: sencha, gyokuro and bancha, all under 10 euros.")
    return answers


async def run_all(
    runs: int, calls: int, store: TraceStore | None, agent: Agent = AGENT
) -> tuple[float, float, float]:
    """Wall and CPU seconds (all threads: the ingest thread's work counts) to run every case
    and, with a store, to commit every row; and the main thread's CPU seconds of those."""
    started, cpu, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    for run in range(runs):
        model = ScriptedModel(script(calls, run), name="bench-model")
        labelled = (
            store.with_labels(eval_id="bench", case_id=f"case-{run}", trial=1)
            if store is not None
            else None
        )
        result = await Runner.run(
            agent, f"Find me teas, please ({run})", model=model, store=labelled
        )
        if not result.completed:
            raise RuntimeError(f"run {run} did not complete: {result.error}")
    if store is not None:
        store.flush()
    return (
        time.perf_counter() - started,
        time.process_time() - cpu,
        time.thread_time() - main_cpu,
    )


STARTS: list[float] = []  # how long each recording process took to be ready


def new_store(path: Path, in_process: bool) -> TraceStore:
    if in_process:
        return TraceStore(path)
    return TraceStore(path, recording_process=True)  # type: ignore[call-arg]


async def recorded_runs(
    tmp: Path, attempt: int, runs: int, calls: int, in_process: bool
) -> tuple[float, float, float]:
    store = new_store(tmp / f"recorded_{attempt}_{in_process}.duckdb", in_process)
    store.settle()  # create and migrate the file first: a one-off cost, not per run
    if not in_process:
        started = time.perf_counter()
        store.start_recording()  # type: ignore[attr-defined]  # likewise its process's start
        STARTS.append(time.perf_counter() - started)
    timed = await run_all(runs, calls, store)
    stored = store.sql("SELECT count(*) AS n FROM runs").rows[0][0]
    if stored != runs:
        raise RuntimeError(f"expected {runs} stored runs, found {stored}")
    store.close()
    return timed


async def main(runs: int, calls: int, repeat: int) -> None:
    plain: list[tuple[float, float, float]] = []
    recorded: list[tuple[float, float, float]] = []
    in_process: list[tuple[float, float, float]] = []
    has_process = "recording_process" in inspect.signature(TraceStore).parameters
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        await run_all(5, calls, None)  # warm imports and caches for both sides
        for attempt in range(repeat):
            plain.append(await run_all(runs, calls, None))
            in_process.append(await recorded_runs(Path(tmp), attempt, runs, calls, True))
            if has_process:
                recorded.append(await recorded_runs(Path(tmp), attempt, runs, calls, False))
    print(f"recording cost: {runs} runs x {calls} model calls (2 tools a call), median of {repeat}")
    if has_process:
        print("recorded in the recording process (TraceStore(..., recording_process=True)):")
        report(plain, recorded, runs, repeat)
        print(
            f"  (the process was ready {statistics.median(STARTS):.2f} s after it was started,"
            " once per store, not timed above)"
        )
        print("recorded in this process:")
    report(plain, in_process, runs, repeat)


def report(
    plain: list[tuple[float, float, float]],
    recorded: list[tuple[float, float, float]],
    runs: int,
    repeat: int,
) -> None:
    print("                                    wall       cpu")
    figures = {}
    for index, clock in enumerate(("wall", "cpu")):
        figures[clock] = (
            statistics.median(t[index] for t in plain) / runs * 1000,
            statistics.median(t[index] for t in recorded) / runs * 1000,
        )
    wall, cpu = figures["wall"], figures["cpu"]
    print(f"  unrecorded                  {wall[0]:8.2f}  {cpu[0]:8.2f} ms/run")
    print(f"  recorded (rows committed)   {wall[1]:8.2f}  {cpu[1]:8.2f} ms/run")
    print(
        f"  ratio recorded / unrecorded {wall[1] / wall[0]:7.2f}x {cpu[1] / cpu[0]:8.2f}x"
        "   (target <= 1.5x)"
    )
    spread = [r[0] / p[0] for p, r in zip(plain, recorded, strict=True)]
    print(f"  wall ratio over the {repeat} repeats: {min(spread):.2f}x to {max(spread):.2f}x")
    main = [statistics.median(t[2] for t in side) / runs * 1000 for side in (plain, recorded)]
    other = [cpu[0] - main[0], cpu[1] - main[1]]
    print(
        f"  recorded run's extra CPU: main thread {main[1] - main[0]:+.2f},"
        f" other threads {other[1] - other[0]:+.2f} ms/run (the recording process's not counted)"
    )


async def by_length(lengths: list[int], steps: int, repeat: int) -> None:
    print(
        f"recording cost by session length: {steps} model calls a row (2 tools a call), "
        f"best of {repeat}; CPU microseconds a model call"
    )
    print(
        "  length   runs  unrecorded  in-process  ratio   rec. process: this  +its own"
        "  ratio (this / both)"
    )
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        stores = {
            "here": TraceStore(Path(tmp) / "here.duckdb"),
            "process": TraceStore(Path(tmp) / "process.duckdb", recording_process=True),
        }
        for store in stores.values():
            store.settle()
        stores["process"].start_recording()
        await run_all(5, 6, None)
        for store in stores.values():
            await run_all(5, 6, store)
        for length in lengths:
            runs = max(1, steps // length)
            agent = shop_agent(length + 1)
            best: dict[str, float] = {}
            for _ in range(repeat):
                plain = (await run_all(runs, length, None, agent))[1]
                here = (await run_all(runs, length, stores["here"], agent))[1]
                before = recording_process_cpu(stores["process"])
                process = (await run_all(runs, length, stores["process"], agent))[1]
                child = recording_process_cpu(stores["process"]) - before
                for name, value in (
                    ("plain", plain),
                    ("here", here),
                    ("process", process),
                    ("both", process + child),
                ):
                    best[name] = min(best.get(name, value), value)
            per = {name: value / (runs * length) * 1e6 for name, value in best.items()}
            print(
                f"  {length:6d} {runs:6d} {per['plain']:10.1f} {per['here']:11.1f}"
                f" {per['here'] / per['plain']:6.2f}x {per['process']:19.1f}"
                f" {per['both']:9.1f}  {per['process'] / per['plain']:5.2f}x /"
                f" {per['both'] / per['plain']:.2f}x"
            )
        for store in stores.values():
            store.close()
    print("  (target: <= 1.5x, flat from 10 to 10,000 calls)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--lengths", type=counts, help="comma-separated session lengths (model calls)"
    )
    parser.add_argument("--steps", type=int, default=20000, help="model calls per length")
    options = parser.parse_args()
    if options.lengths:
        asyncio.run(by_length(options.lengths, options.steps, min(options.repeat, 3)))
    else:
        asyncio.run(main(options.runs, options.calls, options.repeat))
