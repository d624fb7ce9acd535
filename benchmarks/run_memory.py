"""Memory of one long run: RSS growth per step, with and without a trace store.

    python benchmarks/run_memory.py [--steps 1000,2000,10000] [--store both|on|off]
                                    [--no-tracemalloc] [--top 0]

One scripted tool-calling run (`ScriptedModel`, a trivial tool, `steps` tool calls and a final
answer) per length and store setting, each in a fresh Python process so one measurement
cannot inherit another's heap. In that process a 10-step warm-up run comes first (imports,
template compile, the store's file and schema); then the baseline RSS is taken, the measured
run made and, with the `RunResult` still held (its events, the model's recorded requests),
RSS taken again. Printed per run: RSS growth, peak RSS growth, bytes per step, the growth's
ratio to the shortest length's next to the ratio of the lengths (linear memory: the two
match), seconds per step, and — in a second process under tracemalloc — the traced peak.
Agent settings: the runtime's defaults, but for `Limits(max_iterations=steps + 1,
repeat_warn_at=steps + 2, repeat_stop_at=steps + 3, timeout_s=None)`: raised past the run's
length, and no time limit, so the longest run (slower still under tracemalloc) runs to its end.
`--top N` lists the N source lines that allocated most of what the run kept. Reading it:
`<made X>` and `<packed X>` lines are the run's events as its `EventLog` keeps them
(`runtime/packed.py`); a line of 120-byte blocks at an unlikely place (uuid, a tool's call) is
a small dict's key table, which CPython reuses from a free list, so tracemalloc names where
the table was first allocated, not the dict (a message, a request) that holds it now.

Before the `EventLog`, a step's four events and the records in them were kept as pydantic
models: ~5.5 KB a step in all (55 MB for 10,000 steps) against ~2.9 KB with it.
The code before issue #15 deep-copied every request into `ScriptedModel.requests` and kept a
full copy of the message list in every `ModelRequest` event, so its memory and time grow
with the square of the length: measure it at shorter lengths (`--steps 500,1000,2000`).
No timings or sizes are asserted anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from agentbench import Agent, Limits, Runner, ScriptedModel, ToolCall, tool

_PAGE = os.sysconf("SC_PAGE_SIZE")


@tool(effect="read_only")
def lookup(n: int) -> dict[str, Any]:
    """Look up item n of the catalogue."""
    return {"n": n, "name": f"item {n}", "price": 4.5 + n % 7, "in_stock": n % 3 != 0}


def agent(steps: int) -> Agent:
    return Agent(
        name="bench",
        instructions="Look items up, one at a time, then answer.",
        tools=[lookup],
        limits=Limits(
            max_iterations=steps + 1,
            repeat_warn_at=steps + 2,
            repeat_stop_at=steps + 3,
            timeout_s=None,
        ),
    )


def script(steps: int) -> list[Any]:
    return [ToolCall("lookup", {"n": i}) for i in range(steps)] + [f"looked up {steps} items"]


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


async def one_run(steps: int, store: Any, held: list[Any]) -> None:
    """Run and keep the result in `held`: returned through `asyncio.run`, Python 3.11 would
    build its full repr (when asyncio looks up its SIGINT handler, only if it installed one)."""
    model = ScriptedModel(script(steps), name="bench-model")
    result = await Runner.run(agent(steps), "look items up", model=model, store=store)
    assert result.completed, result.error
    assert result.iterations == steps + 1, result.iterations
    if store is not None:
        store.flush()  # the run's rows committed: their memory is counted, not deferred
    held.extend((result, model))


def child(steps: int, with_store: bool, traced: bool, top: int) -> dict[str, Any]:
    """One measurement, in this (fresh) process; returns its figures."""
    with tempfile.TemporaryDirectory(prefix="agentbench-memory-") as tmp:
        store = None
        if with_store:
            from agentbench import TraceStore  # lazy in both versions: DuckDB only when used

            store = TraceStore(Path(tmp) / "traces.duckdb")
        asyncio.run(one_run(10, store, []))
        gc.collect()
        if traced:
            tracemalloc.start(1)
        before, started = rss(), time.perf_counter()
        held: list[Any] = []
        asyncio.run(one_run(steps, store, held))
        elapsed = time.perf_counter() - started
        gc.collect()
        figures: dict[str, Any] = {"steps": steps, "store": with_store}
        figures["s_per_step"] = elapsed / steps
        if traced:
            snapshot = tracemalloc.take_snapshot()
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            figures.update(traced_current=current, traced_peak=peak)
            figures["top"] = [
                (str(stat.traceback[0]), stat.size, stat.count)
                for stat in snapshot.statistics("lineno")[:top]
            ]
        else:
            figures.update(growth=rss() - before, peak_growth=max(0, peak_rss() - before))
        figures["events"] = len(held[0].events)
        if store is not None:
            store.close()
        return figures


def measure(steps: int, with_store: bool, traced: bool, top: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", str(steps), "--top", str(top)]
    command += ["--store", "on" if with_store else "off"]
    command += [] if traced else ["--no-tracemalloc"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measurement {command[2:]} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def mb(value: float) -> str:
    return f"{value / 1e6:8.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1000,2000,10000", help="comma-separated lengths")
    parser.add_argument("--store", choices=("both", "on", "off"), default="both")
    parser.add_argument("--no-tracemalloc", action="store_true")
    parser.add_argument("--top", type=int, default=0, help="allocation sites to list")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        traced = not args.no_tracemalloc
        print(json.dumps(child(args.child, args.store == "on", traced, args.top)))
        return
    lengths = sorted(int(part) for part in args.steps.split(","))
    settings = {"both": (False, True), "on": (True,), "off": (False,)}[args.store]
    import agentbench

    print(f"run memory, agentbench from {Path(agentbench.__file__).parent}")
    print(f"lengths {lengths}; each figure from a fresh process; RSS growth with the result held")
    for with_store in settings:
        print(f"\nstore {'on' if with_store else 'off'}")
        print(
            "  steps   RSS growth  peak growth  bytes/step  growth ratio  length ratio"
            "   s/step   traced peak"
        )
        first: dict[str, Any] | None = None
        for steps in lengths:
            row = measure(steps, with_store, traced=False, top=0)
            traced = None if args.no_tracemalloc else measure(steps, with_store, True, args.top)
            first = first or row
            ratio = row["growth"] / first["growth"] if first["growth"] > 0 else float("nan")
            peak = mb(traced["traced_peak"]) if traced else "        -"
            print(
                f"  {steps:>5}  {mb(row['growth'])}  {mb(row['peak_growth'])}"
                f"  {row['growth'] / steps:>10,.0f}  {ratio:>12.2f}"
                f"  {steps / first['steps']:>12.2f}  {row['s_per_step'] * 1e3:>6.2f}ms  {peak}"
            )
            for where, size, count in (traced or {}).get("top", []):
                print(f"         {size / 1e6:7.2f} MB  {count:>8,} blocks  {where}")


if __name__ == "__main__":
    main()
