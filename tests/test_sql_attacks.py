"""SQL attacks by class, each refused by the guard with the message that says why.

The classes: file reads through table names, catalog and environment leaks, writes and other
side effects, table functions, functions the engine does not vouch for, and denial of service
(nesting, length, values whose size an argument sets). Every attack is checked three ways: by
the guard alone, against the whitelist read from a *writable* database that has secret files
beside it, a sequence, a session variable, an attached database and macros of its own; through the
tool on that connection, after which nothing changed and no secret appears; and — where the
engine can hold on its own — directly on a database opened by path, bypassing the guard, which
must refuse too. Attacks the locked-down engine would run (catalog reads, `repeat` of a billion
characters, `sleep_ms`) are marked `engine=False`: for those the guard is the only line.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from agentbench import ResultKind
from agentbench.runtime.builtin.sql import read_catalog
from agentbench.tools import QueryRejected, check_query, open_duckdb_read_only, sql_query

SECRET = "sk-live-4f1e"  # in every file beside the database, and in the session variable
TABLE = "is not one of the database's tables"
TABLE_FUNCTION = "table function"
DENIED = "is not allowed: it"
UNKNOWN = "is not one of the database's built-in functions"
NESTING = f"the limit is {24}"
SIZE = "size argument must be a number literal"
SERIES = "may produce at most 10,000 elements"
WIDTH = "widths and precisions must be written in the format"
RELATIONS = "reads more than 64 tables and subqueries"


@dataclass(frozen=True)
class Attack:
    kind: str
    query: str
    message: str  # what the guard's refusal must say
    engine: bool = False  # the locked-down engine refuses it on its own too


def _nested(opening: str, inner: str, closing: str, depth: int) -> str:
    return "SELECT " + opening * depth + inner + closing * depth


def _joins(count: int) -> str:
    return " ".join(f"JOIN orders AS o{i} ON o{i}.id = o{i - 1}.id" for i in range(1, count))


def _doubling_ctes(levels: int) -> str:
    """Each CTE joins the one before to itself: 1 KB of SQL, 2^levels columns to bind."""
    ctes = ", ".join(
        f"c{i} AS (SELECT * FROM c{i - 1} AS x, c{i - 1} AS y)" for i in range(1, levels)
    )
    return f"WITH c0 AS (SELECT * FROM orders), {ctes} SELECT count(*) FROM c{levels - 1}"


def _correlated_subqueries(count: int) -> str:
    columns = ", ".join(
        f"(SELECT max(amount) FROM orders AS u{i} WHERE u{i}.id = o.id)" for i in range(count)
    )
    return f"SELECT {columns} FROM orders AS o"


ATTACKS = [
    # -- file reads: a table name DuckDB's replacement scans would open as a file ----------
    Attack("file", "SELECT value FROM secrets.csv WHERE key = 'api_key'", TABLE, engine=True),
    Attack("file", 'SELECT * FROM "secrets.csv"', TABLE, engine=True),
    Attack("file", 'SELECT * FROM secrets."csv"', TABLE, engine=True),
    Attack("file", "SELECT * FROM 'secrets.csv'", TABLE, engine=True),
    Attack("file", "FROM secrets.csv", TABLE, engine=True),
    Attack("file", "SELECT * FROM export.parquet LIMIT 1", TABLE, engine=True),
    Attack("file", "SELECT * FROM events.jsonl", TABLE, engine=True),
    Attack("file", "SELECT * FROM backup.csv.gz", TABLE, engine=True),
    Attack("file", "SELECT count(*) FROM 'sec*.csv'", TABLE, engine=True),
    Attack("file", 'SELECT * FROM "./secrets.csv"', TABLE, engine=True),
    Attack("file", 'SELECT * FROM shop.main."secrets.csv"', TABLE, engine=True),
    Attack(
        "file", "SELECT o.id, s.value FROM orders AS o CROSS JOIN secrets.csv AS s", TABLE, True
    ),
    Attack("file", "WITH leak AS (SELECT * FROM secrets.csv) SELECT * FROM leak", TABLE, True),
    Attack("file", "SELECT (SELECT max(value) FROM secrets.csv) AS v", TABLE, engine=True),
    Attack("file", "SELECT id FROM orders WHERE id IN (SELECT 1 FROM secrets.csv)", TABLE, True),
    Attack(
        "file", "SELECT name FROM customers UNION ALL SELECT value FROM secrets.csv", TABLE, True
    ),
    Attack("file", "DESCRIBE secrets.csv", TABLE, engine=True),
    Attack("file", "SHOW secrets.csv", TABLE, engine=True),
    Attack("file", "EXPLAIN SELECT * FROM secrets.csv", TABLE, engine=True),
    Attack("file", "EXPLAIN ANALYZE SELECT * FROM export.parquet", TABLE, engine=True),
    # A CTE named like the file: used outside its scope, DuckDB would read the file.
    Attack(
        "file",
        'SELECT * FROM (WITH "secrets.csv" AS (SELECT 1 AS v) SELECT v FROM "secrets.csv"), '
        '"secrets.csv"',
        TABLE,
        engine=True,
    ),
    Attack(
        "file",
        'WITH "secrets.csv" AS (SELECT 1 AS v) SELECT v FROM "secrets.csv"',
        "looks like a file name",
    ),
    Attack(
        "file",
        "SELECT * FROM (WITH inner_cte AS (SELECT 1 AS v) SELECT v FROM inner_cte) AS a, inner_cte",
        TABLE,
        engine=True,
    ),
    Attack("file", "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS v) SELECT * FROM a", TABLE),
    # -- catalog and environment leaks: paths, settings, other databases ------------------
    Attack(
        "catalog", "SELECT name, setting FROM pg_catalog.pg_settings WHERE name LIKE '%dir%'", TABLE
    ),
    Attack("catalog", "SELECT * FROM pg_settings", TABLE),
    Attack("catalog", "SELECT relname FROM pg_catalog.pg_class", TABLE),
    Attack("catalog", "SELECT schema_name FROM information_schema.schemata", TABLE),
    Attack("catalog", "SELECT table_catalog, table_name FROM information_schema.columns", TABLE),
    Attack("catalog", "SELECT * FROM temp.information_schema.tables", TABLE),
    Attack("catalog", "SELECT path FROM duckdb_databases", TABLE),
    Attack("catalog", "SELECT path FROM system.main.duckdb_databases", TABLE),
    Attack("catalog", "SELECT file FROM pragma_database_list", TABLE),
    Attack("catalog", "SELECT sql FROM sqlite_master", TABLE),
    Attack("catalog", "SELECT * FROM other.payroll", TABLE, engine=True),
    Attack("catalog", "SELECT salary FROM other.main.payroll", TABLE, engine=True),
    Attack("catalog", "SELECT * FROM duckdb_settings()", TABLE_FUNCTION),
    Attack("catalog", "SELECT * FROM duckdb_tables()", TABLE_FUNCTION),
    Attack("catalog", "SELECT * FROM duckdb_temporary_files()", TABLE_FUNCTION),
    Attack("catalog", "SELECT * FROM pragma_table_info('orders')", TABLE_FUNCTION),
    Attack("catalog", "SELECT current_setting('temp_directory')", DENIED),
    Attack("catalog", "SELECT getvariable('api_key')", DENIED),
    Attack("catalog", "SELECT pg_get_viewdef(1)", DENIED),
    Attack("catalog", "SHOW ALL TABLES", "SHOW ALL TABLES is not allowed"),
    Attack("catalog", "SHOW DATABASES", "SHOW DATABASES is not allowed"),
    # -- writes and other side effects -----------------------------------------------------
    Attack("write", "SELECT nextval('order_ids') AS id", DENIED, engine=True),
    Attack("write", "SELECT setval('order_ids', 1000000)", DENIED, engine=True),
    Attack("write", "SELECT id, nextval('order_ids') FROM orders", DENIED, engine=True),
    Attack("write", "WITH n AS (SELECT nextval('order_ids') AS v) SELECT v FROM n", DENIED, True),
    Attack("write", "SELECT * FROM orders WHERE id < nextval('order_ids')", DENIED, engine=True),
    Attack("write", "SELECT \"NEXTVAL\"('order_ids')", DENIED, engine=True),
    Attack("write", "SELECT main.nextval('order_ids')", "as a plain function", engine=True),
    Attack("write", "SELECT 'order_ids'.nextval()", "as a plain function", engine=True),
    Attack("write", "SELECT list_transform([1, 2], x -> nextval('order_ids'))", DENIED, True),
    Attack("write", "SELECT bump()", UNKNOWN, engine=True),  # a user macro around nextval
    Attack("write", "SELECT currval('order_ids')", DENIED, engine=True),
    Attack("write", "SELECT setseed(0.25)", DENIED),
    Attack("write", "SELECT write_log('owned')", DENIED),
    Attack("write", "SELECT sleep_ms(60000)", DENIED),
    Attack("write", "SELECT pg_sleep(60)", DENIED),
    # -- table functions, harmless or not: nothing but the catalog's tables in FROM ---------
    Attack("table function", "SELECT * FROM generate_series(1, 3)", TABLE_FUNCTION),
    Attack("table function", "SELECT * FROM unnest([1, 2, 3])", TABLE_FUNCTION),
    Attack("table function", "SELECT * FROM repeat_row(1, num_rows := 1000000000)", TABLE_FUNCTION),
    Attack("table function", "SELECT * FROM json_each('{\"a\": 1}')", TABLE_FUNCTION),
    Attack("table function", "SELECT * FROM test_all_types()", TABLE_FUNCTION),
    Attack(
        "table function",
        "SELECT * FROM orders, LATERAL generate_series(1, orders.id)",
        TABLE_FUNCTION,
    ),
    Attack("table function", "SELECT * FROM read_blob('secrets.csv')", TABLE_FUNCTION, True),
    Attack(
        "table function", "SELECT * FROM parquet_metadata('export.parquet')", TABLE_FUNCTION, True
    ),
    Attack("table function", "SELECT * FROM sniff_csv('secrets.csv')", TABLE_FUNCTION, True),
    # -- functions the engine does not vouch for -------------------------------------------
    Attack("function", "SELECT leak('x')", UNKNOWN, engine=True),  # the caller's own macro
    Attack("function", "SELECT http_post('http://192.0.2.1/', {}, {})", DENIED, engine=True),
    Attack("function", "SELECT __internal_compress_string_ubigint('x')", DENIED),
    # -- denial of service: nesting and length are checked before parsing ------------------
    Attack("dos", _nested("(", "1", ")", 30), NESTING),
    Attack("dos", _nested("(", "1", ")", 2000), NESTING, engine=True),
    Attack("dos", _nested("(SELECT ", "1", ")", 40), NESTING),
    Attack("dos", _nested("CASE WHEN true THEN ", "1", " END", 30), NESTING),
    Attack("dos", _nested("[", "1", "]", 30), NESTING),
    Attack("dos", _nested("list_transform([1], x -> ", "x", ")", 20), "lambdas nest 9 deep"),
    # Plans DuckDB builds without checking for interrupts, and that outgrow the query.
    Attack("dos", "SELECT count(*) FROM orders AS o0 " + _joins(300), RELATIONS),
    Attack("dos", _doubling_ctes(20), RELATIONS),
    Attack("dos", _correlated_subqueries(200), RELATIONS),
    Attack("dos", "SELECT " + "NOT " * 1200 + "true", NESTING, engine=True),
    Attack("dos", "SELECT " + "- " * 1500 + "1", "nested too deeply to check", engine=True),
    Attack(
        "dos", "SELECT " + " + ".join(["id"] * 8000) + " FROM orders", "the limit is 20,000", True
    ),
    # -- values whose size an argument sets: built in one piece, deaf to interrupts --------
    Attack("dos", "SELECT length(repeat('ab', 900000000))", SIZE),
    Attack("dos", "SELECT repeat(name, 100000 * 100000) FROM customers", SIZE),
    Attack("dos", "SELECT repeat([1, 2, 3], 700000000)", SIZE),
    Attack("dos", "SELECT lpad('', 2000000000, '.')", SIZE),
    Attack("dos", "SELECT rpad(name, 1073741824, '.') FROM customers", SIZE),
    Attack("dos", "SELECT space(1500000000)", SIZE),
    Attack("dos", "SELECT bitstring('1', 2000000000)", SIZE),
    Attack("dos", "SELECT len(list_resize([0], 1500000000))", SIZE),
    Attack("dos", "SELECT array_resize([0], id * 1000000000) FROM orders", SIZE),
    Attack("dos", "SELECT repeat(repeat('x', 10000), 10000)", "nested inside another sized"),
    Attack("dos", "SELECT lpad(repeat('y', 9000), 9000, 'z')", "nested inside another sized"),
    Attack("dos", "SELECT len(range(2000000000))", SERIES),
    Attack("dos", "SELECT generate_series(1, 3000000000)", SERIES),
    Attack("dos", "SELECT unnest(range(0, 2000000000, 1))", SERIES),
    Attack("dos", "SELECT range(id * 1000000000) FROM orders", "whole-number literals"),
    Attack("dos", "SELECT printf('%1999999999d', 7)", WIDTH),
    Attack("dos", "SELECT printf('%.*f', 1000000000, 1.5)", WIDTH),
    Attack("dos", "SELECT format('{:>{}}', 'x', 1500000000)", WIDTH),
    Attack("dos", "SELECT format('{:1500000000}', 'x')", WIDTH),
    Attack("dos", "SELECT printf(name, 1) FROM customers", "format must be a string literal"),
]
IDS = [f"{a.kind}-{i}" for i, a in enumerate(ATTACKS)]
ENGINE = [a for a in ATTACKS if a.engine]
ENGINE_IDS = [f"{a.kind}-{ATTACKS.index(a)}" for a in ENGINE]


def _build(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
    conn.execute("INSERT INTO customers VALUES (1, 'Ada'), (2, 'Bo')")
    conn.execute("CREATE TABLE orders (id INTEGER, customer_id INTEGER, amount DOUBLE)")
    conn.execute("INSERT INTO orders VALUES (1, 1, 10), (2, 1, 30), (3, 2, 20), (4, 2, 40)")
    conn.execute("CREATE SEQUENCE order_ids")
    conn.execute("CREATE MACRO bump() AS nextval('order_ids')")


@pytest.fixture
def beside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with secret files, as DuckDB's replacement scans would find them."""
    (tmp_path / "secrets.csv").write_text(f"key,value\napi_key,{SECRET}\n")
    (tmp_path / "events.jsonl").write_text(json.dumps({"token": SECRET}) + "\n")
    (tmp_path / "notes.json").write_text(json.dumps({"note": SECRET}))
    with gzip.open(tmp_path / "backup.csv.gz", "wt") as handle:
        handle.write(f"k,v\npassword,{SECRET}\n")
    with duckdb.connect() as conn:
        path = str(tmp_path / "export.parquet")
        conn.execute(f"COPY (SELECT '{SECRET}' AS s) TO '{path}' (FORMAT parquet)")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def writable(beside: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """What a careless caller might pass: writable, external access on, secrets in reach."""
    conn = duckdb.connect()
    _build(conn)
    conn.execute(f"SET VARIABLE api_key = '{SECRET}'")
    conn.execute("ATTACH ':memory:' AS other")
    conn.execute("CREATE TABLE other.main.payroll (name VARCHAR, salary INTEGER)")
    conn.execute("INSERT INTO other.main.payroll VALUES ('Ada', 1)")
    conn.execute("CREATE TEMP MACRO leak(s) AS getvariable('api_key')")
    conn.execute("USE memory")
    yield conn
    conn.close()


@pytest.fixture
def shop(beside: Path) -> Path:
    """The same database as a file, for the engine's own defence."""
    path = beside / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:
        _build(conn)
    return path


@pytest.mark.parametrize("attack", ATTACKS, ids=IDS)
def test_the_guard_refuses(attack: Attack, writable: duckdb.DuckDBPyConnection) -> None:
    catalog = read_catalog(writable)
    with pytest.raises(QueryRejected) as refused:
        check_query(attack.query, "duckdb", catalog)
    assert attack.message in refused.value.message


@pytest.mark.parametrize("attack", ATTACKS, ids=IDS)
async def test_through_the_tool_nothing_changes_or_leaks(
    attack: Attack, writable: duckdb.DuckDBPyConnection, beside: Path
) -> None:
    before = sorted(p.name for p in beside.iterdir())
    result = await sql_query(writable).invoke({"query": attack.query})
    assert result.kind is ResultKind.BUSINESS_FAILURE, result
    assert attack.message in (result.error or "")
    assert SECRET not in result.model_dump_json()
    assert writable.execute("SELECT count(*), sum(amount) FROM orders").fetchone() == (4, 100.0)
    assert writable.execute("SELECT nextval('order_ids')").fetchone() == (1,)  # never advanced
    assert sorted(p.name for p in beside.iterdir()) == before


@pytest.mark.parametrize("attack", ENGINE, ids=ENGINE_IDS)
def test_the_engine_refuses_without_the_guard(attack: Attack, shop: Path) -> None:
    conn = open_duckdb_read_only(shop)
    try:
        with pytest.raises(duckdb.Error):
            conn.execute(attack.query).fetchall()
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (4,)
    finally:
        conn.close()


def test_every_class_is_covered() -> None:
    kinds = {a.kind for a in ATTACKS}
    assert kinds == {"file", "catalog", "write", "table function", "function", "dos"}
    assert len(ATTACKS) == len({a.query for a in ATTACKS})
