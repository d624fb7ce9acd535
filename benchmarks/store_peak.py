"""The trace store's share of a driver's peak memory, as the store grows.

    python benchmarks/store_peak.py [--runs 40000] [--batch 100] [--every 2000]

Records generated six-call runs (`trace_ingest.run_events`) into a fresh store, `--batch`
runs per flush, in this one process, and prints — each time the store has `--every` more
runs — the process's resident memory now, its peak so far, and the peak's rise over the
baseline taken after the first batch. Python's own memory stays flat here (the rows go to
DuckDB and are let go); what rises is DuckDB's: when a checkpoint compacts a table's small
row groups into larger ones (checkpoint vacuuming), it holds the rows it merges, up to a row
group of 122,880 rows of the widest table — about 170 MB for six-call runs, reached near
20,000 runs, and no more however large the store grows. Without that compaction
(`SET max_vacuum_tasks = 0`) the peak stays flat but the file is ~3.6× larger (104 MB
against 29 MB for 10,000 runs). No timings or sizes are asserted anywhere.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_ingest import record, run_events

from agentbench.trace.store import TraceStore


def memory() -> tuple[int, int]:
    """(resident, peak resident) of this process in MB, from its /proc status."""
    found: dict[str, int] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) // 1024
    return found["VmRSS"], found["VmHWM"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--every", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "store.duckdb"
        store = TraceStore(path)
        base: int | None = None
        print(f"{'runs':>7} {'RSS MB':>7} {'peak MB':>8} {'peak rise MB':>13} {'file MB':>8}")
        for stored in range(args.batch, args.runs + 1, args.batch):
            runs = [run_events(f"r{stored}_{i}", 6)[0] for i in range(args.batch)]
            record(store, runs)
            del runs
            resident, peak = memory()
            if base is None:
                base = peak
            if stored % args.every == 0:
                size = path.stat().st_size / 2**20
                print(f"{stored:>7} {resident:>7} {peak:>8} {peak - base:>13} {size:>8.0f}")
        store.close()


if __name__ == "__main__":
    main()
