"""Trace ingest: recording speed against a raw Arrow insert, and stored bytes per step.

    python benchmarks/trace_ingest.py [--runs 40] [--steps 50] [--repeat 3]

1. Synthetic runs (a growing tool-calling conversation) are fed to a `TraceRecorder` on a
   `TraceStore` until every row is committed: recorded steps per second, end to end (event →
   redacted rows → journal → Arrow → DuckDB). The same rows, read back as Arrow tables, are
   then inserted into a fresh DuckDB file with one INSERT per table: the floor. Printed: both
   rates and their ratio, the floor timed twice — its inserts alone, and with the file opened
   before them and closed after, as the recorded path opens the store and closes it when
   flushed (closing is when DuckDB writes the rows from its log into the file): the fair
   comparison. Earlier versions of this script printed only the first, and one attempt; it
   now makes REPEAT, interleaved, and prints medians and each attempt's ratio.
2. One run per length (25 … 200 steps): stored bytes per step against the bytes of the run's
   messages. The ratio must stay flat as runs grow; storing every request in full (shown for
   contrast) grows with the length of the run.
3. Flatness: the same number of steps as short runs (25 steps) and as long ones (400 steps),
   each recorded and raw-inserted REPEAT times, medians taken: recorded steps/s for both
   lengths and their ratio (target: within 20%), and recorded time over raw Arrow time for
   each, both ways (target: at most 3.3x).

Only APIs that exist before and after the performance work are used, so the same script
measures both (`PYTHONPATH=/tmp/before python benchmarks/trace_ingest.py`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from agentbench.runtime.events import (
    ModelRequest,
    ModelResponse,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from agentbench.runtime.models import ChatResponse, ToolCall, Usage
from agentbench.runtime.tools import ToolResult
from agentbench.trace import TraceRecorder, TraceStore
from agentbench.trace._json import canonical
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.schema import TABLES

try:  # the runtime sends a view of its conversation where it has one (feature-detected,
    # so this script measures the tree from before it too, which sent lists)
    from agentbench.runtime.message_view import MessageView
except ImportError:
    MessageView = None

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the catalogue.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def run_events(run_id: str, steps: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """A run's events, and every message it sent (for the size baseline)."""
    system = {"role": "system", "content": "You answer questions about the catalogue."}
    conversation: list[dict[str, Any]] = [
        {"role": "user", "content": "Find me three teas under 10 euros, with reasons."},
    ]
    messages: list[dict[str, Any]] = [system, *conversation]
    events: list[Any] = []
    seq = 0

    def add(cls: type, **fields: Any) -> None:
        nonlocal seq
        events.append(cls(run_id=run_id, seq=seq, agent="shop", **fields))
        seq += 1

    add(RunStarted, input=messages[1]["content"], model="bench")
    for step in range(1, steps + 1):
        sent = MessageView(system, conversation) if MessageView else list(messages)
        request = {"model": "bench", "messages": sent, "tools": TOOLS}
        add(ModelRequest, step=step, request=request)
        call = ToolCall("search", {"q": f"tea number {step}"}, id=f"call_{run_id}_{step}")
        response = ChatResponse(
            tool_calls=[call],
            finish_reason="tool_calls",
            usage=Usage(input_tokens=40 * len(messages), output_tokens=12),
            latency_ms=350.0,
            model="bench",
        )
        add(ModelResponse, step=step, response=response)
        add(ToolStarted, step=step, call_id=call.id, tool="search", arguments={"q": call.name})
        data = {"results": [{"name": f"tea {step}-{i}", "price": 4.5 + i} for i in range(4)]}
        result = ToolResult.ok(data).model_copy(update={"duration_ms": 2.0})
        add(
            ToolFinished,
            step=step,
            call_id=call.id,
            tool="search",
            arguments={"q": call.name},
            result=result,
            effect="read_only",
        )
        for message in (
            response.as_message(),
            {"role": "tool", "tool_call_id": call.id, "content": str(data)},
        ):
            messages.append(message)
            conversation.append(message)
    add(RunFinished, stop_reason="completed", output="done", iterations=steps)
    return events, messages


def record(store: TraceStore, runs: list[list[Any]]) -> float:
    """Seconds to record every run and commit it (the clock stops after the flush)."""
    started = time.perf_counter()
    recorder = TraceRecorder(store, redactor=Redactor(), code_version=lambda: "bench")
    for events in runs:
        for event in events:
            recorder(event)
    store.flush()
    return time.perf_counter() - started


def raw_insert(source: Path, target: Path) -> tuple[float, float]:
    """Seconds for one Arrow INSERT per table of the same rows into a fresh store: the
    inserts alone, and with opening and closing the file around them (the recorded path
    opens the store it writes and closes it when flushed, and closing is when DuckDB moves
    the rows from its write-ahead log into the file)."""
    reader = duckdb.connect(str(source), read_only=True)
    tables = {name: reader.sql(f"SELECT * FROM {name}").to_arrow_table() for name in TABLES}
    ddl = {
        name: reader.execute(
            "SELECT sql FROM duckdb_tables() WHERE table_name = ?", [name]
        ).fetchone()[0]
        for name in TABLES
    }
    reader.close()
    writer = duckdb.connect(str(target))
    for statement in ddl.values():
        writer.execute(statement)
    writer.close()  # the tables exist, as the recorded store's do (it was settled first)
    opening = time.perf_counter()
    writer = duckdb.connect(str(target))
    started = time.perf_counter()
    writer.execute("BEGIN")
    for name, table in tables.items():
        writer.register(f"batch_{name}", table)
        writer.execute(f"INSERT INTO {name} BY NAME SELECT * FROM batch_{name}")
    writer.execute("COMMIT")
    inserted = time.perf_counter()
    writer.close()
    return inserted - started, time.perf_counter() - opening


def stored_bytes(path: Path, run_id: str) -> int:
    """Bytes of the run's stored values (text as UTF-8, numbers and times 8 bytes each)."""
    conn = duckdb.connect(str(path), read_only=True)
    total = 0
    for name in TABLES:
        table = conn.sql(f"SELECT * FROM {name} WHERE run_id = '{run_id}'").to_arrow_table()
        total += table.nbytes
    conn.close()
    return total


def size_table(folder: Path, lengths: list[int]) -> None:
    print("\nstored bytes per step (one run of each length)")
    print("  steps  bytes/step  message bytes  stored/messages  full requests/messages")
    for steps in lengths:
        store = TraceStore(folder / f"size_{steps}.duckdb")
        events, messages = run_events(f"run_size_{steps}", steps)
        record(store, [events])
        stored = stored_bytes(store.path, f"run_size_{steps}")
        message_bytes = sum(len(canonical(m)) for m in messages)
        full = sum(
            len(canonical({**e.request, "messages": list(e.request["messages"])}))
            for e in events
            if e.kind == "model_request"
        )
        print(
            f"  {steps:>5}  {stored / steps:>10,.0f}  {message_bytes:>13,}"
            f"  {stored / message_bytes:>15.2f}  {full / message_bytes:>21.1f}"
        )
        store.close()


def timed_pair(folder: Path, name: str, runs: list[list[Any]]) -> tuple[float, tuple[float, float]]:
    """Recorded seconds and raw Arrow seconds (see `raw_insert`) for these runs, each into
    a fresh store."""
    store = TraceStore(folder / f"{name}.duckdb")
    store.settle()  # create and migrate the file first: the baseline's tables exist too
    recorded_s = record(store, runs)
    store.close()
    return recorded_s, raw_insert(store.path, folder / f"{name}_raw.duckdb")


def flatness(folder: Path, total_steps: int, repeat: int) -> None:
    short, long = 25, 400
    rates: dict[int, list[float]] = {short: [], long: []}
    over_insert: dict[int, list[float]] = {short: [], long: []}
    over_whole: dict[int, list[float]] = {short: [], long: []}
    for attempt in range(repeat):
        for steps in (short, long):  # interleaved, so load on the machine hits both alike
            count = max(1, total_steps // steps)
            runs = [run_events(f"run_{steps}_{attempt}_{i:04d}", steps)[0] for i in range(count)]
            recorded_s, (insert_s, whole_s) = timed_pair(folder, f"flat_{steps}_{attempt}", runs)
            rates[steps].append(count * steps / recorded_s)
            over_insert[steps].append(recorded_s / insert_s)
            over_whole[steps].append(recorded_s / whole_s)
    rate = {steps: statistics.median(values) for steps, values in rates.items()}
    print(f"\nflatness: {total_steps} steps as {short}- and {long}-step runs, median of {repeat}")
    print("  recorded time over the raw Arrow insert's (target <= 3.3x): inserts only, and")
    print("  with the file opened and closed around them as the recorded path does")
    for steps in (short, long):
        print(
            f"  {steps:>3}-step runs: {rate[steps]:>8,.0f} steps/s recorded,"
            f" {statistics.median(over_insert[steps]):5.1f}x inserts only,"
            f" {statistics.median(over_whole[steps]):5.1f}x with open and close"
        )
    print(f"  steps/s {long} / {short}: {rate[long] / rate[short]:.2f} (target: 0.80 or more)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--flat-steps", type=int, default=2000, help="steps per flatness sample")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        folder = Path(tmp)
        runs = [run_events(f"run_{i:04d}", args.steps)[0] for i in range(args.runs)]
        steps = args.runs * args.steps
        timings = []  # (recorded, inserts only, with open and close), one per attempt
        for attempt in range(args.repeat):  # each into fresh files; the machine is noisy
            recorded_s, raw = timed_pair(folder, f"recorded_{attempt}", runs)
            timings.append((recorded_s, *raw))
        recorded_s, insert_s, whole_s = (statistics.median(t) for t in zip(*timings, strict=True))
        over_whole = sorted(recorded / whole for recorded, _, whole in timings)
        print(f"trace ingest, {datetime.now(UTC):%Y-%m-%d}: {args.runs} runs x {args.steps} steps")
        print(f"  medians of {args.repeat} attempts, each recorded, then raw-inserted")
        print(
            f"  recorded (event -> rows -> journal -> DuckDB): {steps / recorded_s:>10,.0f} steps/s"
        )
        raw, whole = "  raw Arrow insert of the same rows:", "    with the file opened and closed:"
        print(f"{raw:<49}{steps / insert_s:>10,.0f} steps/s")
        print(f"{whole:<49}{steps / whole_s:>10,.0f} steps/s")
        print(
            f"  ratio recorded / raw: {recorded_s / insert_s:.1f}x inserts only,"
            f" {recorded_s / whole_s:.1f}x with open and close"
            f" (each attempt: {', '.join(f'{r:.1f}x' for r in over_whole)})"
        )
        size_table(folder, [25, 50, 100, 200])
        flatness(folder, args.flat_steps, args.repeat)


if __name__ == "__main__":
    main()
