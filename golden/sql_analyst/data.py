"""The SQL analyst suite's shop database: small, fixed, rebuilt when missing."""

from __future__ import annotations

import os
import tempfile
from datetime import date, timedelta
from pathlib import Path

import duckdb

DATABASE = Path(__file__).with_name("shop.duckdb")

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


def build(path: Path = DATABASE) -> Path:
    """Create the database at `path` unless it is there; safe when processes race."""
    if path.exists():
        return path
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".duckdb")
    os.close(handle)
    os.unlink(temporary)  # DuckDB wants to create the file itself
    with duckdb.connect(temporary) as conn:
        conn.execute(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR, tier VARCHAR, "
            "country VARCHAR)"
        )
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", CUSTOMERS)
        conn.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, ordered_at DATE, "
            "amount DECIMAL(10, 2))"
        )
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", _orders())
    os.replace(temporary, path)
    return path
