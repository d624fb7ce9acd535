"""The SQL analyst suite's shop database: small, fixed, rebuilt when missing or stale.

The file is git-ignored and built on first use. It stores a fingerprint of the data below, so
editing this module (a value, a row, a column) rebuilds it on the next run instead of leaving
the old data in place until someone deletes the file by hand.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from datetime import date, timedelta
from pathlib import Path

import duckdb

from agentbench.errors import UsageError
from agentbench.runtime.builtin.sql import open_duckdb_read_only

DATABASE = Path(__file__).with_name("shop.duckdb")
SCHEMA = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR, tier VARCHAR, country VARCHAR)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, ordered_at DATE, "
    "amount DECIMAL(10, 2))",
)
# The fingerprint lives in a table comment: a table of its own would show in the tool's schema
# listing and in SHOW TABLES, and so change what every recorded request and answer saw.
_STAMP = "built from data "

CUSTOMERS = [
    (1, "Ada Lovelace", "gold", "UK"),
    (2, "Grace Hopper", "gold", "US"),
    (3, "Alan Turing", "silver", "UK"),
    (4, "Katherine Johnson", "gold", "US"),
    (5, "Linus Torvalds", "bronze", "FI"),
    (6, "Margaret Hamilton", "silver", "US"),
    (7, "Tim Berners-Lee", "bronze", "UK"),
    (8, "Barbara Liskov", "gold", "US"),
]


def _orders() -> list[tuple[int, int, date, float]]:
    start = date(2026, 1, 3)
    rows = []
    for order_id in range(1, 41):
        customer = (order_id * 5) % 8 + 1
        ordered = start + timedelta(days=(order_id * 37) % 170)
        amount = round(20 + (order_id * 73) % 180 + (order_id % 4) * 0.25, 2)
        rows.append((order_id, customer, ordered, amount))
    return rows


def fingerprint() -> str:
    """A hash of everything the database is built from, taken from the values this module
    holds when `build` runs."""
    text = repr((SCHEMA, CUSTOMERS, _orders()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def built_from(path: Path) -> str | None:
    """The fingerprint the database at `path` was built from, or None (missing, from before
    fingerprints, or unreadable)."""
    if not path.is_file():
        return None
    try:
        # The sql_query tool's own settings: DuckDB refuses a second connection to a file with
        # different settings in one process, and the agent's tool may have this file open.
        with open_duckdb_read_only(path) as conn:
            row = conn.execute(
                "SELECT comment FROM duckdb_tables() WHERE table_name = 'customers'"
            ).fetchone()
    except (duckdb.Error, UsageError):
        return None
    stamp = str(row[0]) if row and row[0] else ""
    return stamp.removeprefix(_STAMP) if stamp.startswith(_STAMP) else None


def build(path: Path = DATABASE) -> Path:
    """Create the database at `path` unless it holds the current data; safe when processes
    race: each builds a private file and renames it into place, so a reader sees the old
    database or the new one, never half of one."""
    wanted = fingerprint()
    if built_from(path) == wanted:
        return path
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".duckdb")
    os.close(handle)
    os.unlink(temporary)  # DuckDB wants to create the file itself
    try:
        with duckdb.connect(temporary) as conn:
            for statement in SCHEMA:
                conn.execute(statement)
            conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", CUSTOMERS)
            conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", _orders())
            conn.execute(f"COMMENT ON TABLE customers IS '{_STAMP}{wanted}'")  # hex: safe
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
