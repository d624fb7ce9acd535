"""The SQL whitelist and limits: what a query may name, and how much work it may ask for.

Tables come from the database's own catalog (optionally narrowed with `tables=[...]`), so the
tool's description, SHOW TABLES and the guard always agree; functions come from the engine's
own list of built-ins free of side effects, and every function sqlglot models is checked, by
rendering it for DuckDB, to reach only those. Length, nesting, planning size and result size
are bounded with a message that names the limit; checking runs off the event loop and its CPU
time counts against the query's time limit.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from agentbench import ResultKind, ToolResult
from agentbench.errors import UsageError
from agentbench.runtime.builtin import _sql_calls, sql_guard
from agentbench.runtime.builtin import sql as sql_module
from agentbench.runtime.builtin.sql import read_catalog
from agentbench.runtime.builtin.sql_guard import Catalog
from agentbench.tools import QueryRejected, check_query, open_duckdb_read_only, sql_query


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER, name VARCHAR, region VARCHAR)")
        conn.execute("INSERT INTO customers VALUES (1, 'Ada', 'east'), (2, 'Bo', 'west')")
        conn.execute("CREATE TABLE orders (id INTEGER, customer_id INTEGER, amount DOUBLE)")
        conn.execute("INSERT INTO orders VALUES (1, 1, 10), (2, 1, 30), (3, 2, 20), (4, 2, 40)")
        conn.execute("CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount >= 30")
        conn.execute("CREATE SCHEMA sales")
        conn.execute("CREATE TABLE sales.targets (region VARCHAR, target DOUBLE)")
        conn.execute("INSERT INTO sales.targets VALUES ('east', 50), ('west', 70)")
    return path


async def ask(tool: Any, query: str) -> ToolResult:
    return await tool.invoke({"query": query})


# --- tables ---------------------------------------------------------------------------------


async def test_the_catalog_is_the_description_and_the_whitelist(shop: Path) -> None:
    tool = sql_query(shop)
    assert " big_orders(" in tool.description and " sales.targets(" in tool.description
    for query, rows in [
        ("SELECT count(*) FROM big_orders", [[2]]),
        ("SELECT sum(target) FROM sales.targets", [[120.0]]),
        ("SELECT count(*) FROM shop.sales.targets", [[2]]),
        ("SELECT count(*) FROM shop.orders", [[4]]),
        ('SELECT count(*) FROM "Orders"', [[4]]),  # DuckDB names are case-insensitive
        ("SHOW TABLES", [["big_orders"], ["customers"], ["orders"], ["sales.targets"]]),
    ]:
        result = await ask(tool, query)
        assert result.kind is ResultKind.OK, (query, result.error)
        assert result.data["rows"] == rows, query
    refused = await ask(tool, "SELECT * FROM targets")  # not in the default schema
    assert "query only big_orders, customers, orders, sales.targets" in (refused.error or "")


async def test_tables_narrows_the_description_and_the_whitelist(shop: Path) -> None:
    tool = sql_query(shop, tables=["orders", "SALES.targets"])
    assert "orders(" in tool.description and "sales.targets(" in tool.description
    assert "customers(" not in tool.description and "big_orders" not in tool.description
    shown = await ask(tool, "SHOW TABLES")
    assert shown.data["rows"] == [["orders"], ["sales.targets"]]
    for hidden in ["SELECT * FROM customers", "DESCRIBE customers", "SHOW big_orders"]:
        result = await ask(tool, hidden)
        assert result.kind is ResultKind.BUSINESS_FAILURE
        assert "query only orders, sales.targets" in (result.error or ""), hidden
    assert (await ask(tool, "SELECT count(*) FROM orders")).data["rows"] == [[4]]


def test_tables_must_exist(shop: Path) -> None:
    with pytest.raises(UsageError, match=r"'order_lines'.*it has: big_orders, customers"):
        sql_query(shop, tables=["orders", "order_lines"])


def test_an_attached_database_is_neither_listed_nor_queryable(shop: Path) -> None:
    conn = duckdb.connect()
    try:
        conn.execute(f"ATTACH '{shop}' AS shop (READ_ONLY)")
        conn.execute("CREATE TABLE mine (x INTEGER)")
        catalog = read_catalog(conn)
        assert catalog.names() == ["mine"]
        with pytest.raises(QueryRejected, match="query only mine"):
            check_query("SELECT * FROM shop.orders", catalog=catalog)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "query",
    [
        "WITH o AS (SELECT * FROM orders) SELECT count(*) FROM o",
        "WITH orders AS (SELECT 1 AS id) SELECT * FROM orders",  # a CTE may shadow a table
        "WITH a AS (SELECT 1 AS v), b AS (SELECT v FROM a) SELECT * FROM b",
        "WITH a AS (SELECT 1 AS v) SELECT * FROM (SELECT * FROM a) AS inner_query",
        "WITH a AS (SELECT 1 AS v) SELECT (SELECT max(v) FROM a)",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) "
        "SELECT sum(i) FROM n",
        "SELECT * FROM (WITH a AS (SELECT 1 AS v) SELECT * FROM a) AS b",
    ],
)
def test_ctes_are_visible_where_sql_says(query: str) -> None:
    check_query(query, catalog=Catalog.of(["orders"]))


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM (WITH a AS (SELECT 1 AS v) SELECT * FROM a) AS b, a",
        "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS v) SELECT * FROM a",
        "WITH a AS (SELECT * FROM a) SELECT * FROM a",  # not RECURSIVE: a is not yet defined
    ],
)
def test_a_cte_out_of_scope_is_not_a_table(query: str) -> None:
    with pytest.raises(QueryRejected, match="is not one of the database's tables"):
        check_query(query, catalog=Catalog.of(["orders"]))


def test_without_a_catalog_no_table_can_be_read() -> None:
    assert check_query("SELECT 1 AS one").sql == "SELECT 1 AS one"
    with pytest.raises(QueryRejected, match="no tables are available"):
        check_query("SELECT * FROM orders")


async def test_show_and_describe_of_the_catalogs_tables_work(shop: Path) -> None:
    tool = sql_query(shop)
    described = await ask(tool, "DESCRIBE sales.targets")
    assert described.data["rows"][0][:2] == ["region", "VARCHAR"]
    shown = await ask(tool, "SHOW big_orders")
    assert shown.data["rows"][0][:2] == ["id", "INTEGER"]
    explained = await ask(tool, "EXPLAIN SELECT * FROM big_orders")
    assert explained.kind is ResultKind.OK


@pytest.fixture
def items() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute("CREATE TABLE items (id INTEGER, name TEXT)")
    conn.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    yield conn
    conn.close()


async def test_sqlite_gets_the_same_whitelist(items: sqlite3.Connection) -> None:
    tool = sql_query(items)
    assert (await ask(tool, "SHOW TABLES")).data["rows"] == [["items"]]
    assert (await ask(tool, "SELECT count(*) FROM main.items")).data["rows"] == [[2]]
    refused = await ask(tool, "SELECT * FROM sqlite_master")
    assert "query only items" in (refused.error or "")


def test_a_database_that_cannot_list_its_tables_needs_tables(items: sqlite3.Connection) -> None:
    with pytest.raises(UsageError, match="cannot list this database's tables"):
        sql_query(items, dialect="postgres")  # information_schema does not exist in sqlite
    tool = sql_query(items, dialect="postgres", tables=["items"])
    assert "Tables:" not in tool.description


# --- functions ------------------------------------------------------------------------------

FUNCTIONS = {
    "strings": (
        "SELECT upper(name), lpad(CAST(id AS VARCHAR), 4, '0'), concat_ws('-', name, region), "
        "regexp_replace(name, 'a', 'A'), split_part('a,b', ',', 2), left(name, 1), "
        "printf('%05.1f', 2.5), format('{}:{:>3}', name, id) FROM customers WHERE id = 1",
        [["ADA", "0001", "Ada-east", "AdA", "b", "A", "002.5", "Ada:  1"]],
    ),
    "dates": (
        "SELECT strftime(DATE '2026-03-04', '%Y-%m'), date_trunc('month', DATE '2026-03-04'), "
        "date_diff('day', DATE '2026-01-01', DATE '2026-03-01'), year(DATE '2026-03-04'), "
        "DATE '2026-01-31' + INTERVAL 1 MONTH",
        [["2026-03", "2026-03-01T00:00:00", 59, 2026, "2026-02-28T00:00:00"]],
    ),
    "lists and structs": (
        "SELECT list_transform([1, 2, 3], x -> x * 2), list_reverse([1, 2]), "
        "array_to_string(['a', 'b'], '/'), {'k': 1}.k, len(range(5)), repeat('ab', 2)",
        [[[2, 4, 6], [2, 1], "a/b", 1, 5, "abab"]],
    ),
    "aggregates and windows": (
        "SELECT count(*), round(avg(amount), 1), arg_max(id, amount), median(amount), "
        "string_agg(CAST(id AS VARCHAR), ',' ORDER BY id), list(id ORDER BY id)[1] FROM orders",
        [[4, 25.0, 4, 25.0, "1,2,3,4", 1]],
    ),
    "window": (
        "SELECT id, lag(amount) OVER (ORDER BY id), ntile(2) OVER (ORDER BY id) FROM orders "
        "ORDER BY id LIMIT 2",
        [[1, None, 1], [2, 10.0, 1]],
    ),
    "json and conditionals": (
        "SELECT json_extract_string('{\"a\": 7}', '$.a'), coalesce(NULL, 3), nullif(1, 1), "
        "if(true, 'y', 'n'), CASE WHEN random() < 2 THEN 'ok' END",
        [["7", 3, None, "y", "ok"]],
    ),
}


@pytest.mark.parametrize("query, rows", list(FUNCTIONS.values()), ids=list(FUNCTIONS))
async def test_analysts_functions_are_allowed(query: str, rows: list[Any], shop: Path) -> None:
    result = await ask(sql_query(shop), query)
    assert result.kind is ResultKind.OK, result.error
    assert result.data["rows"] == rows


def test_a_callers_macro_never_passes_for_a_built_in() -> None:
    """A macro of the caller's may wrap anything, even under a built-in's name."""
    conn = duckdb.connect()
    try:
        conn.execute("CREATE SEQUENCE s")
        conn.execute("CREATE MACRO upper(x) AS nextval('s')")
        conn.execute("CREATE MACRO tidy(x) AS trim(x)")
        catalog = read_catalog(conn)
        for query in ["SELECT upper('a')", "SELECT tidy(' a ')"]:
            with pytest.raises(QueryRejected, match="not one of the database's built-in"):
                check_query(query, catalog=catalog)
        check_query("SELECT lower('A'), trim(' a ')", catalog=catalog)
    finally:
        conn.close()


def test_built_in_macros_count_only_if_their_body_passes() -> None:
    conn = duckdb.connect()
    try:
        catalog = read_catalog(conn)
    finally:
        conn.close()
    assert catalog.functions is not None
    # list_reverse and if are macros over pure functions; pg_sleep wraps sleep_ms,
    # get_block_size and pg_get_viewdef read catalog tables in a subquery.
    assert {"list_reverse", "if", "array_to_string", "strftime", "round"} <= catalog.functions
    refused = {"pg_sleep", "get_block_size", "pg_get_viewdef", "nextval", "setval", "sleep_ms"}
    assert not refused & catalog.functions
    assert refused <= catalog.unvouched


# DuckDB flags these, or lists them only as table functions, yet in scalar position they do
# nothing outside the query: random numbers, an error, a list unnested, names of the database.
HARMLESS_RENDERINGS = {
    "random",
    "uuid",
    "error",
    "unnest",
    "generate_subscripts",
    "json_group_object",
    "current_database",
    "current_schema",
    "current_schemas",
}


def test_every_function_sqlglot_models_renders_to_an_allowed_duckdb_function() -> None:
    """Typed functions are allowed by class, so each class's DuckDB rendering is checked here:
    it may call only functions DuckDB vouches for, names DuckDB does not know (the query then
    fails), the harmless ones above — or the class is one the guard refuses."""
    conn = duckdb.connect()
    try:
        catalog = read_catalog(conn)
        listed = {
            str(r[0]).lower()
            for r in conn.execute("SELECT function_name FROM duckdb_functions()").fetchall()
        }
    finally:
        conn.close()
    assert catalog.functions is not None
    generator = Dialect.get_or_raise("duckdb").generator()
    rendered = unsafe = 0
    for cls in [c for c in vars(exp).values() if isinstance(c, type) and issubclass(c, exp.Func)]:
        if cls in (exp.Func, exp.Anonymous, exp.AggFunc):
            continue
        required = {k: exp.column(f"a{i}") for i, (k, r) in enumerate(cls.arg_types.items()) if r}
        try:
            sql = generator.generate(cls(**required))
        except Exception:
            continue  # sqlglot cannot render it for DuckDB: the query could not be generated
        rendered += 1
        called = {m.lower() for m in re.findall(r"([A-Za-z_]\w*)\s*\(", sql)}
        reached = (called & listed) - catalog.functions - HARMLESS_RENDERINGS
        if reached:
            unsafe += 1
            assert issubclass(cls, _sql_calls._REFUSED_MODELLED), (cls.__name__, reached)
    assert rendered > 500 and unsafe == 2  # ReadCSV and ReadParquet


@pytest.mark.parametrize("query", ["SELECT read_csv('x.csv')", "SELECT read_parquet('x')"])
def test_modelled_file_readers_are_refused(query: str) -> None:
    with pytest.raises(QueryRejected, match="is not allowed: it reads or writes files"):
        check_query(query)


# --- limits ---------------------------------------------------------------------------------


def test_nesting_up_to_the_limit_is_fine_and_beyond_it_is_named() -> None:
    deepest = "SELECT " + "(" * 24 + "1" + ")" * 24
    check_query(deepest)
    with pytest.raises(QueryRejected, match=r"nests 25 levels deep .* the limit is 24"):
        check_query("SELECT " + "(" * 25 + "1" + ")" * 25)


def test_length_is_checked_before_anything_else() -> None:
    with pytest.raises(QueryRejected, match="400,011 characters long; the limit is 20,000"):
        check_query("SELECT " + "1+" * 200_000 + "1;;;")


def test_the_node_budget_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_guard, "MAX_NODES", 50)
    with pytest.raises(QueryRejected, match="more than 50 expressions, the limit"):
        check_query("SELECT " + " + ".join(["1"] * 100))


def test_a_stack_overflow_while_parsing_is_a_refusal() -> None:
    """Unary minus nests without parentheses; the recursion limit is caught, not raised."""
    with pytest.raises(QueryRejected, match="nested too deeply to check"):
        check_query("SELECT " + "- " * 1500 + "1")


def test_planning_size_is_bounded_with_ctes_counted_per_use() -> None:
    catalog = Catalog.of(["orders"])
    joins = " ".join(f"JOIN orders AS o{i} ON o{i}.id = o{i - 1}.id" for i in range(1, 64))
    check_query(f"SELECT count(*) FROM orders AS o0 {joins}", catalog=catalog)  # 64 tables
    with pytest.raises(QueryRejected, match="reads more than 64 tables and subqueries"):
        check_query(
            f"SELECT count(*) FROM orders AS o0 {joins} JOIN orders AS x ON true", catalog=catalog
        )
    # Seven CTEs, each using the one before twice: 2^7 = 128 uses of orders.
    ctes = ", ".join(
        f"c{i} AS (SELECT x.id FROM c{i - 1} AS x, c{i - 1} AS y)" for i in range(1, 8)
    )
    with pytest.raises(QueryRejected, match="each use of a CTE counted in full"):
        check_query(f"WITH c0 AS (SELECT id FROM orders), {ctes} SELECT * FROM c7", catalog=catalog)


def test_lambda_nesting_is_bounded() -> None:
    nested = "SELECT " + "list_transform([1], x -> " * 8 + "x" + ")" * 8
    check_query(nested)
    with pytest.raises(QueryRejected, match="lambdas nest 9 deep; the limit is 8"):
        check_query("SELECT " + "list_transform([1], x -> " * 9 + "x" + ")" * 9)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT repeat('-', 10000)",
        "SELECT lpad('7', 10000, '0')",
        "SELECT unnest(range(10000))",
        "SELECT generate_series(1, 10000)",
        "SELECT range(-5, 5)",
        "SELECT printf('%10000s', 'x')",
    ],
)
def test_sizes_up_to_the_limit_are_fine(query: str) -> None:
    check_query(query)


async def test_checking_runs_off_the_event_loop(shop: Path) -> None:
    """A query near the length limit takes the guard a good fraction of a second; meanwhile
    the event loop keeps running (sync tools run on a worker thread)."""
    tool = sql_query(shop)
    assert not tool.is_async
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    ticker = asyncio.create_task(tick())
    result = await ask(tool, "SELECT 1 IN (1" + ",1" * 9_980 + ") AS hit")
    ticker.cancel()
    assert result.data["rows"] == [[True]]
    assert ticks >= 5


async def test_checking_counts_against_the_time_limit(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sql_module.check_query

    def slow(query: str, dialect: str, catalog: Catalog) -> sql_guard.CheckedQuery:
        burn_until = time.thread_time() + 0.3  # 0.3 s of this thread's CPU
        while time.thread_time() < burn_until:
            pass
        return real(query, dialect, catalog)

    monkeypatch.setattr(sql_module, "check_query", slow)
    result = await ask(sql_query(shop, timeout_s=0.2), "SELECT 1")
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "checking the query took longer than the 0.2 s time limit" in (result.error or "")


async def test_a_check_kept_off_the_cpu_does_not_count(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a loaded machine the checking thread waits for a CPU; that wait is not the check's.
    real = sql_module.check_query

    def descheduled(query: str, dialect: str, catalog: Catalog) -> sql_guard.CheckedQuery:
        time.sleep(0.3)  # off the CPU for longer than the whole time limit
        return real(query, dialect, catalog)

    monkeypatch.setattr(sql_module, "check_query", descheduled)
    result = await ask(sql_query(shop, timeout_s=0.2), "SELECT 1 AS one")
    assert result.kind is ResultKind.OK and result.data["rows"] == [[1]]


async def test_the_result_size_is_capped_in_bytes(shop: Path) -> None:
    tool = sql_query(shop, max_result_bytes=2_000)
    result = await ask(
        tool, "SELECT i, repeat('x', 100) AS pad FROM (SELECT unnest(range(100)) AS i)"
    )
    assert result.kind is ResultKind.OK and result.data["truncated"] is True
    assert 10 <= result.data["row_count"] < 20
    assert "result size limit of 2,000 bytes" in result.data["note"]
    whole = await ask(tool, "SELECT repeat('x', 5000) AS pad")
    assert whole.kind is ResultKind.BUSINESS_FAILURE
    assert "first row alone is larger than the result size limit of 2,000 bytes" in (
        whole.error or ""
    )


def test_a_path_opens_with_bounded_memory_and_threads(shop: Path) -> None:
    conn = open_duckdb_read_only(shop)
    try:
        settings = dict(
            conn.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN "
                "('memory_limit', 'threads', 'max_temp_directory_size', 'enable_external_access')"
            ).fetchall()
        )
        with pytest.raises(duckdb.Error):
            conn.execute("SET memory_limit = '64GB'")
    finally:
        conn.close()
    assert settings["memory_limit"].startswith("488") and settings["threads"] == "2"
    assert settings["max_temp_directory_size"] == "0 bytes"
    assert settings["enable_external_access"] == "false"


async def test_a_huge_aggregate_stops_at_the_memory_limit(shop: Path) -> None:
    """1M rows of 10 KB each, glued into one string: the engine refuses past 512 MB."""
    cross = ", ".join(f"orders AS o{i}" for i in range(10))
    query = f"SELECT length(string_agg(repeat('x', 10000), '')) FROM {cross}"
    result = await ask(sql_query(shop), query)
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert "Out of Memory" in (result.error or "")
