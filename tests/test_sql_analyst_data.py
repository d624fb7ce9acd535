"""The SQL analyst suite's shop database follows its data: an edit to `data.py` is rebuilt.

The database file is git-ignored and outlives the code that built it, so a stale file must be
noticed (by its fingerprint) and replaced atomically, also when processes build at once.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from agentbench.cli import main
from agentbench.runtime.builtin import _sql_process
from agentbench.tools import sql_query
from golden.sql_analyst import data

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parents[1]
NAME_OF_ADA = "SELECT name FROM customers WHERE id = 1"


async def ask(path: Path, query: str) -> object:
    result = await sql_query(path, dialect="duckdb").invoke({"query": query})
    assert result.kind == "ok", result
    return result.data


async def test_an_edited_value_reaches_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "before.duckdb", tmp_path / "after.duckdb"
    data.build(first)
    assert "Ada Lovelace" in str(await ask(first, NAME_OF_ADA))
    stamp = data.built_from(first)

    # The same file as before the edit, then the edit: the next build must replace it.
    second.write_bytes(first.read_bytes())
    edited = [(1, "Ada King", "gold", "UK"), *data.CUSTOMERS[1:]]
    monkeypatch.setattr(data, "CUSTOMERS", edited)
    data.build(second)

    answer = str(await ask(second, NAME_OF_ADA))
    assert "Ada King" in answer and "Lovelace" not in answer
    assert data.built_from(second) not in (None, stamp)


def test_unchanged_data_keeps_the_file(tmp_path: Path) -> None:
    path = data.build(tmp_path / "shop.duckdb")
    before = path.stat()
    data.build(path)
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_file_from_before_fingerprints_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:  # the old build: the tables, no fingerprint
        conn.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
        conn.execute("INSERT INTO customers VALUES (1, 'stale')")
    data.build(path)
    assert data.built_from(path) == data.fingerprint()
    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (40,)


async def test_the_fingerprint_is_hidden_from_the_agent(tmp_path: Path) -> None:
    """A table of its own would change the tool's schema listing, and every cassette."""
    path = data.build(tmp_path / "shop.duckdb")
    tool = sql_query(path, dialect="duckdb")
    assert tool.description.endswith(
        " Tables: customers(id INTEGER, name VARCHAR, tier VARCHAR, country VARCHAR); "
        "orders(id INTEGER, customer_id INTEGER, ordered_at DATE, amount DECIMAL(10,2));"
    )
    tables = await tool.invoke({"query": "SHOW TABLES"})
    assert tables.data["rows"] == [["customers"], ["orders"]]


def test_concurrent_builds_leave_one_whole_database(tmp_path: Path) -> None:
    """Two processes with different data rebuild over each other while this one reads: every
    read sees one whole database, and no temporary file is left behind."""
    path = tmp_path / "shop.duckdb"
    path.write_text("not a database: left behind by something else\n")
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from golden.sql_analyst import data
        data.CUSTOMERS = [(1, sys.argv[2], "gold", "UK"), *data.CUSTOMERS[1:]]
        for _ in range(12):  # each build makes the file stale for the other process
            data.build(Path(sys.argv[1]))
        """
    )
    names = ["Ada A", "Ada B"]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), name], cwd=ROOT, stderr=subprocess.PIPE
        )
        for name in names
    ]
    seen = set()
    while any(process.poll() is None for process in processes):
        if data.built_from(path) is not None:
            with duckdb.connect(str(path), read_only=True) as conn:
                seen.add(conn.execute(NAME_OF_ADA).fetchone()[0])
                assert conn.execute("SELECT count(*) FROM orders").fetchone() == (40,)
    for process in processes:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()
    assert seen <= set(names)
    assert data.built_from(path) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop.duckdb"]  # no temporary left


class LateClock:
    """The SQL worker pool's `time`: the real clock plus what the test adds."""

    def __init__(self) -> None:
        self.late = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.late


def test_the_suite_loads_and_passes_when_every_worker_answer_comes_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The suite builds its tool at import: the catalog read used to go through the tool's
    # 5 s per-call limit, so a starved machine failed the whole suite (exit 2, no case run).
    clock = LateClock()
    monkeypatch.setattr(_sql_process, "time", clock)
    real_read = _sql_process._Worker.read_reply

    def late_read(worker: Any, deadline: float) -> dict[str, Any]:
        clock.late += 10  # every answer of a worker reaches us 10 s late
        return real_read(worker, deadline)

    monkeypatch.setattr(_sql_process._Worker, "read_reply", late_read)
    code = main(
        ["run", str(ROOT / "golden" / "sql_analyst"), "--no-report", "--db", str(tmp_path / "t.db")]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pass rate 100.0%" in out and clock.late > 0
