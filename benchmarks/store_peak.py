"""The trace store's share of a driver's peak memory, as the store grows.

    python benchmarks/store_peak.py [--runs 40000] [--batch 100] [--every 2000]
                                    [--row-group-rows N]

Records generated six-call runs (`trace_ingest.run_events`) into a fresh store, `--batch`
runs per flush, in this one process, and prints — each time the store has `--every` more
runs — the process's resident memory now, its peak so far, and the peak's rise over the
baseline taken after the first batch. Python's own memory stays flat here (the rows go to
DuckDB and are let go); what rises is DuckDB's: a checkpoint compacts a table's small row
groups (one a batch) into full ones, holding what it merges. With DuckDB's default groups of
122,880 rows the rise reached ~173 MB for six-call runs (near 20,000 runs; ~450 MB for rows
of 1.5 KB, the width of real requests); writers now attach the store with 4,096-row groups
(`trace/storage/database.py`, `ROW_GROUP_ROWS`) and it stays at ~27 MB, with a file no larger;
`--row-group-rows 122880` shows the old figure. No timings or sizes are asserted anywhere.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_ingest import record, run_events

from agentbench.trace.storage import database
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
    parser.add_argument(
        "--row-group-rows", type=int, default=None, help="rows a row group (default: the store's)"
    )
    args = parser.parse_args()
    if args.row_group_rows is not None:
        database.ROW_GROUP_ROWS = args.row_group_rows
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
