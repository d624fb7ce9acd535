"""What the SQL tool's worker processes cost: a query through a worker against the same query
on a connection in this process.

    python benchmarks/sql_worker.py [--queries 300] [--repeat 3]

The golden shop database is queried with one join and aggregate, the shape an analyst agent
sends, by two `sql_query` tools: one given the file's path (the tool runs the query in a worker
process) and one given a read-only connection (in this process). Both check the query with
the same guard. Printed: milliseconds to make each tool (a path starts the first worker), the
median per-query milliseconds of each over the repeats, and the ratio worker/in-process.
No timings are asserted anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from agentbench.runtime.tools import Tool
from agentbench.tools import open_duckdb_read_only, sql_query

DATABASE = Path(__file__).resolve().parent.parent / "golden" / "sql_analyst" / "shop.duckdb"
QUERY = {
    "query": "SELECT c.country, count(*) AS n, sum(o.amount) AS total FROM orders AS o "
    "JOIN customers AS c ON c.id = o.customer_id GROUP BY 1 ORDER BY 1"
}


async def per_query_ms(tool: Tool, queries: int) -> float:
    first = await tool.invoke(QUERY)
    if first.kind.value != "ok":
        raise SystemExit(f"the benchmark query failed: {first.error}")
    started = time.perf_counter()
    for _ in range(queries):
        await tool.invoke(QUERY)
    return (time.perf_counter() - started) / queries * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    in_worker = sql_query(DATABASE)
    make_worker = (time.perf_counter() - started) * 1000
    connection = open_duckdb_read_only(DATABASE)
    started = time.perf_counter()
    in_process = sql_query(connection)
    make_in_process = (time.perf_counter() - started) * 1000
    local, remote = [], []
    for _ in range(args.repeat):  # interleaved, so load on the machine hits both alike
        local.append(await per_query_ms(in_process, args.queries))
        remote.append(await per_query_ms(in_worker, args.queries))
    a, b = statistics.median(local), statistics.median(remote)
    print(
        f"tool made: path (starts a worker) {make_worker:.0f} ms, "
        f"connection {make_in_process:.0f} ms"
    )
    print(f"per query: in-process {a:.2f} ms, worker process {b:.2f} ms, ratio {b / a:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
