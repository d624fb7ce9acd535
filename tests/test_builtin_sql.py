"""Read-only SQL: attacks are refused wherever they hide; real analytic queries still work.

Every attack is checked twice: by the guard alone, and through the tool against a *writable*
DuckDB connection, after which the table must be intact and nothing written to disk. The
engine-level lockdown of a database opened from a path is tested on its own, as the second
layer that would hold if the guard missed something.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from agentbench import ResultKind, ToolResult
from agentbench.errors import UsageError
from agentbench.runtime.builtin.sql_guard import Catalog
from agentbench.tools import QueryRejected, check_query, open_duckdb_read_only, sql_query

SHOP = Catalog.of(["customers", "orders"])

ATTACKS = [
    "DROP TABLE orders",
    "DELETE FROM orders",
    "UPDATE orders SET amount = 0",
    "INSERT INTO orders VALUES (99, 1, 1.0, DATE '2024-01-01')",
    "WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone",
    "WITH added AS (INSERT INTO orders VALUES (99, 1, 1.0, NULL) RETURNING *) SELECT 1",
    "WITH a AS (SELECT 1) DELETE FROM orders",
    "SELECT 1; DROP TABLE orders",
    "SELECT 1;DROP TABLE orders;",
    "SELECT 1 /* ; */; DROP TABLE orders -- trailing",
    "sElEcT 1; dRoP tAbLe orders",
    "/* SELECT */ DROP TABLE orders",
    "-- a comment\nDROP TABLE orders",
    "DELETE/**/FROM orders",
    "SHOW TABLES; DROP TABLE orders",
    "EXPLAIN SELECT 1; DROP TABLE orders",
    "COPY orders TO '{tmp}/out.csv'",
    "COPY (SELECT * FROM orders) TO '{tmp}/out.parquet' (FORMAT parquet)",
    "ATTACH '{tmp}/other.duckdb' AS other",
    "DETACH other",
    "USE other",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    'SELECT * FROM "/etc/passwd"',
    "SELECT * FROM 'https://example.com/data.csv'",
    "SELECT * FROM read_parquet('s3://bucket/x.parquet')",
    "SELECT * FROM orders WHERE id IN (SELECT 1 FROM read_json('/etc/passwd'))",
    "SELECT id FROM orders UNION ALL SELECT * FROM read_csv('/etc/passwd')",
    "SELECT (SELECT count(*) FROM read_blob('/etc/passwd'))",
    "SELECT * FROM orders CROSS JOIN LATERAL read_csv('/etc/passwd')",
    "SELECT * FROM glob('/root/*')",
    "SELECT * FROM read_text('/etc/shadow')",
    'SELECT * FROM orders, "data.csv"',
    "SELECT * FROM sqlite_scan('{tmp}/x.db', 't')",
    "SELECT * FROM query('DROP TABLE orders')",
    "SELECT * FROM query_table('orders')",
    "SELECT * FROM json_execute_serialized_sql('{{}}')",
    "SELECT current_setting('s3_secret_access_key')",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM duckdb_settings()",
    "SELECT getenv('OPENAI_API_KEY')",
    "SELECT http_get('http://192.0.2.1/')",
    "PRAGMA database_list",
    "SET enable_external_access = true",
    "RESET threads",
    "INSTALL httpfs",
    "LOAD httpfs",
    "EXPORT DATABASE '{tmp}/dump'",
    "IMPORT DATABASE '{tmp}/dump'",
    "CREATE TABLE copy AS SELECT * FROM orders",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "SELECT * INTO stolen FROM orders",
    "ALTER TABLE orders RENAME TO gone",
    "TRUNCATE orders",
    "CHECKPOINT",
    "CALL pragma_version()",
    "BEGIN TRANSACTION",
    "VACUUM",
    "EXPLAIN ANALYZE DELETE FROM orders",
    "EXPLAIN EXPLAIN SELECT 1",
    "DESCRIBE SELECT * FROM read_csv('/etc/passwd')",
    "DESCRIBE read_csv('/etc/passwd')",
    "SHOW read_csv('/etc/passwd')",
    "MERGE INTO orders USING orders AS s ON orders.id = s.id WHEN MATCHED THEN DELETE",
    "SELECT table_name FROM information_schema.tables",
    "SELECT * FROM range(5)",
    "SELECT * FROM duckdb_functions()",
    "",
    "  ;  ",
    "SELECT 1；DROP TABLE orders",
]

LEGITIMATE = {
    "join and group": (
        "SELECT c.region, sum(o.amount) AS total FROM orders o JOIN customers c "
        "ON o.customer_id = c.id GROUP BY c.region ORDER BY c.region",
        [["east", 80.0], ["west", 20.0]],
    ),
    "window function": (
        "SELECT id, rank() OVER (PARTITION BY customer_id ORDER BY amount DESC) AS r "
        "FROM orders ORDER BY id",
        [[1, 2], [2, 1], [3, 1], [4, 1]],
    ),
    "running total": (
        "SELECT id, sum(amount) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND "
        "CURRENT ROW) AS running FROM orders ORDER BY id",
        [[1, 10.0], [2, 40.0], [3, 60.0], [4, 100.0]],
    ),
    "CTE": (
        "WITH big AS (SELECT * FROM orders WHERE amount >= 20) "
        "SELECT count(*) AS n, min(amount) AS smallest FROM big",
        [[3, 20.0]],
    ),
    "nested CTEs and a subquery": (
        "WITH per AS (SELECT customer_id, sum(amount) AS s FROM orders GROUP BY 1), "
        "best AS (SELECT max(s) AS m FROM per) "
        "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM per, best WHERE s = m) "
        "ORDER BY name",
        [["Ada"], ["Cy"]],
    ),
    "qualify": (
        "SELECT customer_id, id FROM orders "
        "QUALIFY row_number() OVER (PARTITION BY customer_id ORDER BY amount DESC) = 1 "
        "ORDER BY customer_id",
        [[1, 2], [2, 3], [3, 4]],
    ),
    "union": ("SELECT 1 AS x UNION ALL SELECT 2 ORDER BY x", [[1], [2]]),
    "generator": ("SELECT sum(i) AS s FROM (SELECT unnest(range(5)) AS i)", [[10]]),
    "dates": (
        "SELECT date_trunc('month', day) AS m, count(*) AS n FROM orders GROUP BY 1 ORDER BY 1",
        [["2024-01-01T00:00:00", 2], ["2024-02-01T00:00:00", 2]],
    ),
    "qualified names": (
        "SELECT count(*) AS n FROM shop.main.orders AS o JOIN main.customers AS c "
        "ON c.id = o.customer_id",
        [[4]],
    ),
    "comments are fine": ("-- the count\nSELECT count(*) /* all */ FROM orders", [[4]]),
    "semicolon at the end": ("SELECT 1 AS one;", [[1]]),
}


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:
        _create_tables(conn)
    return path


def _create_tables(conn: Any) -> None:
    conn.execute("CREATE TABLE customers (id INTEGER, name VARCHAR, region VARCHAR)")
    conn.execute(
        "INSERT INTO customers VALUES (1, 'Ada', 'east'), (2, 'Bo', 'west'), (3, 'Cy', 'east')"
    )
    conn.execute("CREATE TABLE orders (id INTEGER, customer_id INTEGER, amount DOUBLE, day DATE)")
    conn.execute(
        "INSERT INTO orders VALUES (1, 1, 10, '2024-01-05'), (2, 1, 30, '2024-01-20'), "
        "(3, 2, 20, '2024-02-01'), (4, 3, 40, '2024-02-11')"
    )


@pytest.fixture
def writable() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection the guard alone must protect: in memory, writable, external access on."""
    conn = duckdb.connect()
    _create_tables(conn)
    yield conn
    conn.close()


def _files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def ask(tool: Any, query: str) -> ToolResult:
    return await tool.invoke({"query": query})


@pytest.mark.parametrize("attack", ATTACKS)
def test_guard_rejects_attack(attack: str, tmp_path: Path) -> None:
    with pytest.raises(QueryRejected):
        check_query(attack.format(tmp=tmp_path), catalog=SHOP)


@pytest.mark.parametrize("attack", ATTACKS)
async def test_attack_changes_nothing_through_the_tool(
    attack: str, tmp_path: Path, writable: duckdb.DuckDBPyConnection
) -> None:
    tool = sql_query(writable)
    result = await ask(tool, attack.format(tmp=tmp_path))
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert result.error
    assert writable.execute("SELECT count(*) FROM orders").fetchone() == (4,)
    assert writable.execute("SELECT sum(amount) FROM orders").fetchone() == (100.0,)
    assert _files_in(tmp_path) == []


@pytest.mark.parametrize("query, rows", list(LEGITIMATE.values()), ids=list(LEGITIMATE))
async def test_analytic_query_works(query: str, rows: list[list[Any]], database: Path) -> None:
    result = await ask(sql_query(database), query)
    assert result.kind is ResultKind.OK, result.error
    assert result.data["rows"] == rows


@pytest.mark.parametrize(
    "query, first_row",
    [
        ("SHOW TABLES", ["customers"]),
        ("SHOW orders", ["id", "INTEGER"]),
        ("DESCRIBE orders", ["id", "INTEGER"]),
        ("DESCRIBE SELECT 1 AS one", ["one", "INTEGER"]),
        ("EXPLAIN SELECT * FROM orders", ["physical_plan"]),
        ("EXPLAIN ANALYZE SELECT count(*) FROM orders", ["analyzed_plan"]),
    ],
)
async def test_show_describe_explain(query: str, first_row: list[str], database: Path) -> None:
    result = await ask(sql_query(database), query)
    assert result.kind is ResultKind.OK, result.error
    assert result.data["rows"][0][: len(first_row)] == first_row


async def test_invalid_sql_names_line_column_and_token(database: Path) -> None:
    result = await ask(sql_query(database), "SELECT id\nFROM orders WHERE (amount > 1")
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert result.error is not None
    assert "invalid SQL" in result.error and "line 2" in result.error and "column" in result.error


async def test_an_unknown_table_is_named_with_the_tables_there(database: Path) -> None:
    result = await ask(sql_query(database), "SELECT * FROM order_lines")
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "'order_lines' is not one of the database's tables; query only customers, orders" in (
        result.error or ""
    )


async def test_row_limit_is_enforced_and_reported(database: Path) -> None:
    tool = sql_query(database, max_rows=10)
    result = await ask(tool, "SELECT unnest(range(10000)) AS i")
    assert result.kind is ResultKind.OK
    assert result.data["row_count"] == 10 and result.data["truncated"] is True
    assert "row limit of 10" in result.data["note"]
    exact = await ask(tool, "SELECT unnest(range(10)) AS i")
    assert exact.data["row_count"] == 10 and "truncated" not in exact.data


async def test_default_row_limit_is_a_thousand(database: Path) -> None:
    tool = sql_query(database, max_result_chars=100_000)
    result = await ask(tool, "SELECT unnest(range(5000)) AS i")
    assert result.data["row_count"] == 1_000 and result.data["truncated"] is True


async def test_a_slow_query_is_interrupted(database: Path) -> None:
    tool = sql_query(database, timeout_s=0.3)
    # 4^20 rows of a cross join: no table function, and far too many to count in 0.3 s.
    cross = ", ".join(f"orders AS o{i}" for i in range(20))
    result = await ask(tool, f"SELECT count(*) FROM {cross}")
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "interrupted after 0.3 s" in (result.error or "")
    again = await ask(tool, "SELECT count(*) AS n FROM orders")
    assert again.data["rows"] == [[4]]


async def test_description_lists_tables_and_columns(database: Path) -> None:
    tool = sql_query(database)
    assert tool.effect.value == "read_only"
    assert list(tool.parameters["properties"]) == ["query"]
    assert "orders(id INTEGER, customer_id INTEGER, amount DOUBLE, day DATE)" in tool.description
    assert "customers(id INTEGER, name VARCHAR, region VARCHAR)" in tool.description
    assert "1,000 rows" in tool.description


async def test_values_are_json_friendly(database: Path) -> None:
    query = (
        "SELECT 1.5::DECIMAL(10, 2) AS d, DATE '2024-01-02' AS day, 'a'::BLOB AS b, "
        "170141183460469231731687303715884105727::HUGEINT AS big, [1, 2] AS l"
    )
    result = await ask(sql_query(database), query)
    assert result.data["rows"] == [
        ["1.50", "2024-01-02", "\\x61", "170141183460469231731687303715884105727", [1, 2]]
    ]


# --- the second layer: the engine refuses even without the guard ----------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "COPY orders TO '{tmp}/out.csv'",
        "ATTACH '{tmp}/other.duckdb' AS other",
        "INSTALL httpfs",
        "SET enable_external_access = true",
        "DELETE FROM orders",
        "CREATE TABLE t AS SELECT 1",
    ],
)
def test_a_path_opens_locked_down(statement: str, database: Path, tmp_path: Path) -> None:
    conn = open_duckdb_read_only(database)
    try:
        with pytest.raises(duckdb.Error):
            conn.execute(statement.format(tmp=tmp_path))
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (4,)
    finally:
        conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop.duckdb"]


# --- other databases and bad setups ----------------------------------------------------------


@pytest.fixture
def sqlite_db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute("CREATE TABLE items (id INTEGER, name TEXT)")
    conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"item{i}") for i in range(20)])
    yield conn
    conn.close()


async def test_sqlite_works_with_limits_and_guard(sqlite_db: sqlite3.Connection) -> None:
    tool = sql_query(sqlite_db, max_rows=5)
    assert (
        "sqlite dialect" in tool.description and "items(id INTEGER, name TEXT)" in tool.description
    )
    result = await ask(tool, "SELECT id, name FROM items WHERE id >= 3 ORDER BY id")
    assert result.data["rows"][0] == [3, "item3"] and result.data["truncated"] is True
    refused = await ask(tool, "WITH x AS (SELECT 1) DELETE FROM items")
    assert refused.kind is ResultKind.BUSINESS_FAILURE
    assert sqlite_db.execute("SELECT count(*) FROM items").fetchone() == (20,)


async def test_sqlite_query_is_interrupted(sqlite_db: sqlite3.Connection) -> None:
    tool = sql_query(sqlite_db, timeout_s=0.2)
    endless = (
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c"
    )
    result = await ask(tool, endless)
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "interrupted" in (result.error or "")


def test_sqlite_connection_bound_to_its_thread_is_refused_up_front() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        with pytest.raises(UsageError, match="check_same_thread=False"):
            sql_query(conn)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"database": "/nonexistent/shop.duckdb"}, "no DuckDB database"),
        ({"database": 42}, "pass a DuckDB file path"),
        ({"database": None, "dialect": "klingon"}, "klingon"),
        ({"database": None, "max_rows": 0}, "positive"),
    ],
)
def test_bad_setup_is_a_usage_error(kwargs: dict[str, Any], message: str, database: Path) -> None:
    if kwargs.get("database", "") is None:
        kwargs = {**kwargs, "database": database}
    with pytest.raises(UsageError, match=message):
        sql_query(**kwargs)


def test_checked_query_is_what_runs() -> None:
    checked = check_query("select /* hidden; */ id from orders -- note", catalog=SHOP)
    assert checked.sql == "SELECT id FROM orders"
    assert checked.kind == "select"
