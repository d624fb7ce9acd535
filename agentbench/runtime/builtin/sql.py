"""The `sql_query` tool factory: checked, read-only SQL over DuckDB or any DB-API connection.

Every query first passes `sql_guard.check_query`; then it runs on its own cursor with a row
limit (one extra row is fetched, to tell "exactly the limit" from "more") and a timeout that
interrupts the query in the engine, not merely stops waiting for it. Given a path, the factory
opens the DuckDB file itself, read-only and with file and network access switched off inside
DuckDB, so the engine would refuse what the guard might miss. The tool's description lists the
tables and columns, so the model can write a correct query on its first try.
"""

from __future__ import annotations

import datetime
import decimal
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import duckdb
from sqlglot.dialects.dialect import Dialect

from agentbench.errors import UsageError
from agentbench.runtime.builtin.sql_guard import ALLOWED_STATEMENTS, check_query
from agentbench.runtime.tools import BusinessFailure, Effect, Tool, ToolResult

DEFAULT_MAX_ROWS = 1_000
DEFAULT_TIMEOUT_S = 5.0
_SCHEMA_CHARS = 3_000  # how much of the tool description the table listing may take

# DuckDB settings for a database we open ourselves: read-only, no files, no network, no
# extensions, and no way for a query to change any of that.
DUCKDB_LOCKDOWN: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}

# DB-API error classes that mean "this query is wrong" (the model can fix it), by name, so any
# driver's hierarchy is understood; anything else is the database failing, a system error.
_QUERY_ERRORS = frozenset(
    {"ProgrammingError", "DataError", "IntegrityError", "NotSupportedError", "OperationalError"}
)
_SYSTEM_ERRORS = frozenset({"IOException", "ConnectionException", "InterfaceError"})
_DIALECTS_BY_MODULE = {
    "_duckdb": "duckdb",
    "duckdb": "duckdb",
    "sqlite3": "sqlite",
    "psycopg": "postgres",
    "psycopg2": "postgres",
    "pymysql": "mysql",
    "MySQLdb": "mysql",
    "snowflake": "snowflake",
}
_LIST_COLUMNS = {
    "duckdb": (
        "SELECT CASE WHEN table_schema IN ('main', 'public') THEN table_name "
        "ELSE table_schema || '.' || table_name END, column_name, data_type "
        "FROM information_schema.columns "
        "WHERE table_schema NOT IN ('information_schema', 'pg_catalog') "
        "ORDER BY table_schema, table_name, ordinal_position"
    ),
    "sqlite": (
        "SELECT m.name, p.name, p.type FROM sqlite_master AS m "
        "JOIN pragma_table_info(m.name) AS p WHERE m.type IN ('table', 'view') "
        "ORDER BY m.name, p.cid"
    ),
}
_LIST_COLUMNS_STANDARD = (
    "SELECT table_name, column_name, data_type FROM information_schema.columns "
    "WHERE table_schema NOT IN ('information_schema', 'pg_catalog') "
    "ORDER BY table_schema, table_name, ordinal_position"
)


class QueryTimeout(BusinessFailure):
    """The query ran past its time limit and was interrupted."""


@dataclass(frozen=True)
class Rows:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool


class _Cursor(Protocol):
    description: Any

    def execute(self, sql: str) -> Any: ...
    def fetchmany(self, size: int) -> list[Any]: ...
    def close(self) -> None: ...


def sql_query(
    database: str | os.PathLike[str] | Any,
    *,
    dialect: str | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    name: str = "sql_query",
    describe_tables: bool = True,
    max_result_chars: int = 20_000,
) -> Tool:
    """A tool that runs one read-only query against `database` and returns the rows.

    `database` is a path to a DuckDB file (opened read-only, external access off), a DuckDB
    connection, or any DB-API connection (open it read-only yourself; a sqlite3 connection
    needs `check_same_thread=False`, because tools run on a worker thread).
    """
    if max_rows <= 0 or timeout_s <= 0:
        raise UsageError("sql_query: max_rows and timeout_s must be positive")
    connection = _connect(database)
    dialect = dialect or _guess_dialect(connection)
    try:
        Dialect.get_or_raise(dialect)
    except ValueError as exc:
        raise UsageError(f"sql_query: {exc}") from None
    runner = _QueryRunner(connection)

    def run(query: str) -> ToolResult:
        """Run one read-only SQL query and return its rows.

        Args:
            query: a single SELECT (or WITH … SELECT, SHOW, DESCRIBE, EXPLAIN) statement.
        """
        checked = check_query(query, dialect)
        result = runner.run(checked.sql, max_rows=max_rows, timeout_s=timeout_s)
        data: dict[str, Any] = {
            "columns": result.columns,
            "rows": result.rows,
            "row_count": len(result.rows),
        }
        if result.truncated:
            data["truncated"] = True
            data["note"] = (
                f"row limit of {max_rows:,} reached and more rows exist; "
                "aggregate, filter or add LIMIT/OFFSET to see the rest"
            )
        return ToolResult.ok(data)

    description = (
        f"Run one read-only SQL query ({dialect} dialect) and get the rows back. "
        f"Only {ALLOWED_STATEMENTS}; at most {max_rows:,} rows; {timeout_s:g} s time limit."
    )
    if describe_tables:
        description += _schema_listing(runner, dialect)
    return Tool(
        run,
        name=name,
        description=description,
        effect=Effect.READ_ONLY,
        idempotent=True,
        # The query is interrupted at timeout_s; the tool-level timeout is only a backstop.
        timeout_s=timeout_s + 5.0,
        max_result_chars=max_result_chars,
    )


def open_duckdb_read_only(path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file read-only, with file, network and extension access switched off."""
    if not Path(path).is_file():
        raise UsageError(f"sql_query: no DuckDB database at {os.fspath(path)!r}")
    try:
        return duckdb.connect(os.fspath(path), read_only=True, config=dict(DUCKDB_LOCKDOWN))
    except duckdb.ConnectionException as exc:
        # DuckDB allows one configuration per file and process; a connection of ours is open.
        raise UsageError(
            f"sql_query: cannot open {os.fspath(path)!r} read-only ({exc}); this process "
            "already has it open, so pass that connection instead of the path"
        ) from None


def _connect(database: Any) -> Any:
    if isinstance(database, str | os.PathLike):
        return open_duckdb_read_only(database)
    if not callable(getattr(database, "cursor", None)):
        raise UsageError(
            "sql_query: pass a DuckDB file path, a DuckDB connection or a DB-API connection; "
            f"got {type(database).__name__}"
        )
    _check_usable_from_a_thread(database)
    return database


def _check_usable_from_a_thread(connection: Any) -> None:
    """Fail now, clearly, rather than on every call: sync tools run on a worker thread."""
    failure: list[BaseException] = []

    def probe() -> None:
        try:
            connection.cursor().close()
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=probe, name="agentbench-sql-probe")
    worker.start()
    worker.join()
    if failure:
        raise UsageError(
            f"sql_query: the connection cannot be used from another thread ({failure[0]}); "
            "tools run on a worker thread, so open it to allow that "
            "(sqlite3: check_same_thread=False)"
        )


def _guess_dialect(connection: Any) -> str:
    module = type(connection).__module__.split(".")[0]
    dialect = _DIALECTS_BY_MODULE.get(module)
    if dialect is None:
        raise UsageError(
            f"sql_query: cannot tell the SQL dialect of a {module}.{type(connection).__name__}; "
            "pass dialect=... (a sqlglot dialect name such as 'postgres')"
        )
    return dialect


class _QueryRunner:
    """Runs checked SQL on a fresh cursor, under a row limit and an interrupting timeout."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.is_duckdb = isinstance(connection, duckdb.DuckDBPyConnection)
        # A DuckDB cursor is a connection of its own and safe on any thread; a generic DB-API
        # connection is not, so its queries take turns.
        self._lock = threading.Lock()

    def run(self, sql: str, *, max_rows: int, timeout_s: float) -> Rows:
        if self.is_duckdb:
            cursor = self.connection.cursor()
            return self._run_on(cursor, cursor.interrupt, sql, max_rows, timeout_s)
        with self._lock:
            interrupt = getattr(self.connection, "interrupt", None) or getattr(
                self.connection, "cancel", None
            )
            cursor = self.connection.cursor()
            return self._run_on(cursor, interrupt, sql, max_rows, timeout_s)

    def _run_on(
        self, cursor: _Cursor, interrupt: Any, sql: str, max_rows: int, timeout_s: float
    ) -> Rows:
        fired = threading.Event()

        def stop() -> None:
            fired.set()
            interrupt()

        timer = threading.Timer(timeout_s, stop) if callable(interrupt) else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            cursor.execute(sql)
            fetched = cursor.fetchmany(max_rows + 1) if cursor.description else []
            columns = [str(d[0]) for d in cursor.description or ()]
        except Exception as exc:
            if fired.is_set():
                raise QueryTimeout(
                    f"the query was interrupted after {timeout_s:g} s (time limit); make it "
                    "cheaper: filter earlier, aggregate, or add LIMIT"
                ) from None
            raise _classify(exc) from None
        finally:
            if timer is not None:
                timer.cancel()
            cursor.close()
        rows = [[_json_value(v) for v in row] for row in fetched[:max_rows]]
        return Rows(columns=columns, rows=rows, truncated=len(fetched) > max_rows)

    def fetch_all(self, sql: str) -> list[Any]:
        """Run our own (trusted, small) catalog query."""
        return self.run(sql, max_rows=10_000, timeout_s=DEFAULT_TIMEOUT_S).rows


def _classify(exc: Exception) -> Exception:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _SYSTEM_ERRORS or not names & (_QUERY_ERRORS | {"PermissionException"}):
        return exc  # the tool reports it as a system error
    message = str(exc).strip()
    return BusinessFailure(f"the database rejected the query: {type(exc).__name__}: {message}")


def _json_value(value: Any) -> Any:
    """Make a database value JSON-friendly without losing precision."""
    if value is None or isinstance(value, bool | float | str):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID | datetime.timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return str(value)


def _schema_listing(runner: _QueryRunner, dialect: str) -> str:
    try:
        rows = runner.fetch_all(_LIST_COLUMNS.get(dialect, _LIST_COLUMNS_STANDARD))
    except Exception:
        return ""  # a listing is a convenience; a database without one still works
    tables: dict[str, list[str]] = {}
    for table, column, data_type in rows:
        tables.setdefault(str(table), []).append(f"{column} {data_type}".strip())
    if not tables:
        return ""
    text = " Tables:"
    for shown, (table, columns) in enumerate(tables.items()):
        entry = f" {table}({', '.join(columns)});"
        if len(text) + len(entry) > _SCHEMA_CHARS:
            return f"{text} … and {len(tables) - shown} more (use SHOW TABLES, DESCRIBE name)."
        text += entry
    return text
