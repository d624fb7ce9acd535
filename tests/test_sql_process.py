"""A DuckDB file the SQL tool opens is queried in worker processes: what escapes DuckDB's own
limits is stopped by killing the worker, never by losing the agent's process.

Workers are found the way an operator would find them: processes whose command line names the
worker program and this test's database file.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from agentbench import ResultKind, ToolResult
from agentbench.errors import UsageError
from agentbench.tools import sql_query

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"), pytest.mark.slow]


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, note VARCHAR)")
        conn.execute("INSERT INTO orders VALUES (1, 'abcdefghijklmnop'), (2, 'qrstuvwxyz')")
    return path


def workers_of(database: Path) -> list[int]:
    """Live (not zombie) worker processes holding `database`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"_sql_worker.py" in command and str(database).encode() in command and state != "Z":
            found.append(int(entry.name))
    return found


def doubled(times: int, select: str) -> str:
    """A one-row string doubled `times` times across CTEs, then `select` over it."""
    ctes = ", ".join(
        f"b{i} AS (SELECT s || s AS s FROM {'a' if i == 0 else f'b{i - 1}'})" for i in range(times)
    )
    return f"WITH a AS (SELECT 'abcdefghijklmnop' AS s), {ctes} SELECT {select} FROM b{times - 1}"


async def ask(tool, query: str) -> ToolResult:
    return await tool.invoke({"query": query})


async def test_memory_outside_duckdbs_limit_stays_in_the_worker(shop: Path) -> None:
    # Two 32k-character strings: the distance matrix wants ~4 GB, allocated outside DuckDB's
    # buffer manager, so its memory_limit does not apply; in-process this took the host down.
    tool = sql_query(shop, timeout_s=20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = await ask(tool, doubled(11, "damerau_levenshtein(s, reverse(s))"))
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "Out of Memory" in (result.error or "") and "make it cheaper" in (result.error or "")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 300, f"the agent's process grew by {grown_mb:.0f} MB"
    again = await ask(tool, "SELECT count(*) FROM orders")
    assert again.data["rows"] == [[2]]


async def test_a_frozen_worker_is_killed_at_the_wall_clock_backstop(shop: Path) -> None:
    # A frozen engine uses no CPU, so its CPU time limit never comes: the wall clock does.
    tool = sql_query(shop, timeout_s=0.5, wall_timeout_s=1)
    assert (await ask(tool, "SELECT 1 AS one")).data["rows"] == [[1]]
    stuck = workers_of(shop)
    assert stuck
    for pid in stuck:  # a frozen engine: neither its interrupt nor anything else answers
        os.kill(pid, signal.SIGSTOP)
    result = await ask(tool, "SELECT count(*) FROM orders")
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "stopped after 1 s of wall-clock time without finishing" in (result.error or "")
    assert not set(stuck) & set(workers_of(shop)), "the stuck worker is still there"
    assert (await ask(tool, "SELECT count(*) AS n FROM orders")).data["rows"] == [[2]]


async def test_a_worker_that_died_while_idle_is_replaced(shop: Path) -> None:
    tool = sql_query(shop)
    for pid in workers_of(shop):
        os.kill(pid, signal.SIGKILL)
    result = await ask(tool, "SELECT id FROM orders ORDER BY id")
    assert result.kind is ResultKind.OK and result.data["rows"] == [[1], [2]]


async def test_a_worker_killed_mid_query_is_reported_and_replaced(shop: Path) -> None:
    tool = sql_query(shop, timeout_s=30)

    async def kill_the_worker() -> None:
        await asyncio.sleep(0.5)
        for pid in workers_of(shop):
            os.kill(pid, signal.SIGKILL)

    killer = asyncio.create_task(kill_the_worker())
    result = await ask(tool, doubled(12, "levenshtein(s, reverse(s))"))  # ~17 s of work
    await killer
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "database engine stopped" in (result.error or "") and "SIGKILL" in (result.error or "")
    assert (await ask(tool, "SELECT count(*) AS n FROM orders")).data["rows"] == [[2]]


async def test_eight_concurrent_queries_all_answer(shop: Path) -> None:
    tool = sql_query(shop)
    queries = [f"SELECT id + {i} AS v FROM orders ORDER BY id" for i in range(8)]
    results = await asyncio.gather(*(ask(tool, q) for q in queries))
    assert [r.data["rows"] for r in results] == [[[1 + i], [2 + i]] for i in range(8)]
    assert len(workers_of(shop)) <= 4


def test_no_worker_outlives_a_killed_caller(shop: Path, tmp_path: Path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            from agentbench.tools import sql_query
            tool = sql_query({str(shop)!r}, timeout_s=60)
            print("ready", flush=True)
            asyncio.run(tool.invoke({{"query": {doubled(12, "levenshtein(s, reverse(s))")!r}}}))
            """
        )
    )
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert caller.stdout is not None and caller.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the query is running
        assert workers_of(shop)
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 1.0
        while workers_of(shop) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers_of(shop) == []
    finally:
        caller.kill()
        caller.wait()
        if caller.stdout is not None:
            caller.stdout.close()


def test_a_file_that_is_not_a_database_is_a_usage_error(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.duckdb"
    bogus.write_text("not a database\n")
    with pytest.raises(UsageError, match=r"cannot open .*notes\.duckdb.* read-only"):
        sql_query(bogus)
    assert workers_of(bogus) == []
