"""The `sql_query` tool factory: checked, read-only SQL over DuckDB or any DB-API connection.

At construction the factory reads the database's catalog — its tables and views, and for DuckDB
its built-in functions free of side effects — which is both what the tool's description lists
(so the model can write a correct query on its first try) and the whitelist every query is
checked against by `sql_guard.check_query`. A checked query runs on its own cursor under a row
limit and a size limit in bytes (rows are fetched as they stream, one beyond the limit to tell
"exactly the limit" from "more") and a time limit. Given a path, the factory opens the DuckDB
file itself, read-only, with file and network access off, a memory limit, two threads and no
spilling to disk, so the engine refuses what the guard might miss — and opens it in worker
processes (`_sql_process`) under an address-space limit, killed when a query outstays its
time: DuckDB's interrupt and memory limit do not reach a scalar function working on one huge
value, and such a query must not take the agent's process down with it.

The time limit measures the query, not the machine, so a loaded machine cannot turn a query
that passed into one that timed out. For a database file it is CPU time: the CPU the check
took on the checking thread, plus what the worker process used on the query (every engine
thread); waiting for a free worker and starting one never count. A much longer wall-clock
limit (`wall_timeout_s`, a minute by default) still stops a query that makes no progress. On
a connection you pass, the query shares this process with everything else, so its time cannot
be told apart: there the limit after the check is wall clock. Reading the catalog at
construction is setup, not a call: it has no time limit but the wall-clock backstop.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import duckdb
from sqlglot.dialects.dialect import Dialect

from agentbench.errors import UsageError
from agentbench.runtime.builtin._sql_process import (
    DatabaseOpenError,
    WorkerBusyError,
    WorkerDiedError,
    WorkerOverstayedError,
    WorkerPool,
    WorkerStartError,
)
from agentbench.runtime.builtin._sql_worker import FirstRowTooLargeError, fetch_limited
from agentbench.runtime.builtin.sql_guard import (
    ALLOWED_STATEMENTS,
    Catalog,
    TableName,
    check_query,
    vet_functions,
)
from agentbench.runtime.tools import BusinessFailure, Effect, Tool, ToolResult

DEFAULT_MAX_ROWS = 1_000
DEFAULT_TIMEOUT_S = 5.0  # CPU time for a database file; see the module docstring
# The wall-clock backstop for a query that does not finish: this many times its time limit,
# and never less than a minute (a starved machine may give a query a few percent of a core).
WALL_TIMEOUT_FACTOR = 10
MIN_WALL_TIMEOUT_S = 60.0
SETUP_WALL_TIMEOUT_S = 300.0  # reading the catalog at construction: only a hang is stopped
DEFAULT_MAX_RESULT_BYTES = 1_000_000  # of the rows as JSON; the model sees max_result_chars
DUCKDB_MEMORY_LIMIT = "512MB"
DUCKDB_THREADS = 2
# A worker's whole address space: DuckDB's memory limit, the interpreter (~0.8 GB mapped at
# start) and what functions allocate outside the limit. Past it an allocation fails in the
# worker, which reports it or dies; the agent's process is untouched.
DUCKDB_ADDRESS_SPACE = 2 * 1024**3
DUCKDB_WORKERS = 4  # concurrent queries per database file; more wait for a free worker
_SCHEMA_CHARS = 3_000  # how much of the tool description the table listing may take

# DuckDB settings for a database we open ourselves: read-only, no files, no network, no
# extensions, bounded memory and threads, nothing spilled to disk, and no way for a query to
# change any of that. One value per process: DuckDB refuses a second connection to a file with
# different settings.
DUCKDB_LOCKDOWN: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "memory_limit": DUCKDB_MEMORY_LIMIT,
    "threads": DUCKDB_THREADS,
    "max_temp_directory_size": "0B",
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
# The catalog, one row per column: (catalog, schema, table, column, type). DuckDB's listing
# keeps to the connected database, so an attached one is neither shown nor queryable.
_LIST_COLUMNS = {
    "duckdb": (
        "SELECT table_catalog, table_schema, table_name, column_name, data_type "
        "FROM information_schema.columns WHERE table_catalog = current_database() "
        "AND table_schema NOT IN ('information_schema', 'pg_catalog') "
        "ORDER BY table_schema, table_name, ordinal_position"
    ),
    "sqlite": (
        "SELECT NULL, 'main', m.name, p.name, p.type FROM sqlite_master AS m "
        "JOIN pragma_table_info(m.name) AS p WHERE m.type IN ('table', 'view') "
        "ORDER BY m.name, p.cid"
    ),
}
_LIST_COLUMNS_STANDARD = (
    "SELECT table_catalog, table_schema, table_name, column_name, data_type "
    "FROM information_schema.columns "
    "WHERE table_schema NOT IN ('information_schema', 'pg_catalog') "
    "ORDER BY table_schema, table_name, ordinal_position"
)
_DEFAULT_SCHEMAS = ("main", "public")
_LIST_FUNCTIONS = (
    "SELECT function_name, function_type, has_side_effects, internal, extension_name, "
    "macro_definition FROM duckdb_functions() "
    "WHERE function_type IN ('scalar', 'aggregate', 'window', 'macro')"
)


class QueryTimeout(BusinessFailure):
    """The query ran past its time limit and was interrupted."""


class DatabaseError(Exception):
    """The database failed (not the query): the tool reports a system error."""


@dataclass(frozen=True)
class TimeLimit:
    """One call's time limits: `left_s` of the query's own time (CPU time in a worker, wall
    clock on a connection; None: no limit but the backstop), shown to the model as `limit_s`,
    and `wall_s`, the wall-clock backstop that stops a query making no progress."""

    left_s: float | None
    limit_s: float | None
    wall_s: float


_SETUP = TimeLimit(None, None, SETUP_WALL_TIMEOUT_S)  # our own catalog queries


@dataclass(frozen=True)
class Rows:
    columns: list[str]
    rows: list[list[Any]]
    truncated: str | None = None  # "rows" or "bytes": which limit cut the result short


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
    tables: Iterable[str] | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    wall_timeout_s: float | None = None,
) -> Tool:
    """A tool that runs one read-only query against `database` and returns the rows.

    `database` is a path to a DuckDB file (opened read-only, external access off), a DuckDB
    connection, or any DB-API connection (open it read-only yourself; a sqlite3 connection
    needs `check_same_thread=False`, because tools run on a worker thread). Queries may read
    the database's own tables and views, or only those named in `tables`. `timeout_s` is the
    query's time limit (CPU time for a file, wall clock on a connection: see the module
    docstring); `wall_timeout_s` stops a query that has not finished on the wall clock
    (default: ten times `timeout_s`, at least a minute).
    """
    if wall_timeout_s is None:
        wall_timeout_s = max(MIN_WALL_TIMEOUT_S, WALL_TIMEOUT_FACTOR * timeout_s)
    if min(max_rows, timeout_s, max_result_bytes, wall_timeout_s) <= 0:
        raise UsageError(
            "sql_query: max_rows, timeout_s, max_result_bytes and wall_timeout_s must be positive"
        )
    runner = _runner_for(database)
    dialect = dialect or runner.dialect()
    try:
        Dialect.get_or_raise(dialect)
    except ValueError as exc:
        raise UsageError(f"sql_query: {exc}") from None
    catalog, columns = _read_catalog(runner, dialect, tables)

    def run(query: str) -> ToolResult:
        """Run one read-only SQL query and return its rows.

        Args:
            query: a single SELECT (or WITH … SELECT, SHOW, DESCRIBE, EXPLAIN) statement.
        """
        # The check's CPU time on this thread: time the thread spends waiting for a CPU on a
        # loaded machine is not the query's.
        checking = time.thread_time()
        checked = check_query(query, dialect, catalog)
        left = timeout_s - (time.thread_time() - checking)
        if left <= 0:
            raise QueryTimeout(
                f"checking the query took longer than the {timeout_s:g} s time limit; "
                "send a shorter, simpler query"
            )
        result = runner.run(
            checked.sql,
            max_rows=max_rows,
            max_bytes=max_result_bytes,
            limit=TimeLimit(left, timeout_s, wall_timeout_s),
        )
        data: dict[str, Any] = {
            "columns": result.columns,
            "rows": result.rows,
            "row_count": len(result.rows),
        }
        if result.truncated == "rows":
            data["truncated"] = True
            data["note"] = (
                f"row limit of {max_rows:,} reached and more rows exist; "
                "aggregate, filter or add LIMIT/OFFSET to see the rest"
            )
        elif result.truncated == "bytes":
            data["truncated"] = True
            data["note"] = (
                f"result size limit of {max_result_bytes:,} bytes reached and more rows "
                "exist; select fewer or shorter columns, aggregate, or add LIMIT/OFFSET"
            )
        return ToolResult.ok(data)

    description = (
        f"Run one read-only SQL query ({dialect} dialect) and get the rows back. "
        f"Only {ALLOWED_STATEMENTS}; at most {max_rows:,} rows; {timeout_s:g} s time limit."
    )
    if describe_tables:
        description += _schema_listing(columns)
    return Tool(
        run,
        name=name,
        description=description,
        effect=Effect.READ_ONLY,
        idempotent=True,
        # No tool-level wall clock: the tool bounds each of its own waits (a free worker, a
        # worker's start, the query's backstop), and one here would put back the machine's
        # speed that the query's limit leaves out.
        timeout_s=None,
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


def _runner_for(database: Any) -> _Runner:
    if isinstance(database, str | os.PathLike):
        return _ProcessRunner(database)
    if not callable(getattr(database, "cursor", None)):
        raise UsageError(
            "sql_query: pass a DuckDB file path, a DuckDB connection or a DB-API connection; "
            f"got {type(database).__name__}"
        )
    _check_usable_from_a_thread(database)
    return _QueryRunner(database)


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


class _Runner(ABC):
    """Where checked SQL runs: `run` under row and size limits and a timeout (in this process
    on the caller's connection, or in a worker process for a DuckDB file)."""

    is_duckdb: bool

    @abstractmethod
    def dialect(self) -> str:
        """The sqlglot dialect the checked SQL is parsed in."""

    @abstractmethod
    def run(self, sql: str, *, max_rows: int, max_bytes: int, limit: TimeLimit) -> Rows:
        """The rows of `sql`, cut at `max_rows` / `max_bytes`, interrupted at `limit`."""

    def fetch_all(self, sql: str) -> list[Any]:
        """Run our own (trusted) catalog query: setup, so no time limit but the backstop."""
        return self.run(sql, max_rows=100_000, max_bytes=100_000_000, limit=_SETUP).rows


class _QueryRunner(_Runner):
    """Runs checked SQL on a fresh cursor of the caller's connection, under row and size limits
    and an interrupting timeout."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.is_duckdb = isinstance(connection, duckdb.DuckDBPyConnection)
        # A DuckDB cursor is a connection of its own and safe on any thread; a generic DB-API
        # connection is not, so its queries take turns.
        self._lock = threading.Lock()

    def dialect(self) -> str:
        return _guess_dialect(self.connection)

    def run(self, sql: str, *, max_rows: int, max_bytes: int, limit: TimeLimit) -> Rows:
        limits = (max_rows, max_bytes, limit)
        if self.is_duckdb:
            cursor = self.connection.cursor()
            return self._run_on(cursor, cursor.interrupt, sql, *limits)
        with self._lock:
            interrupt = getattr(self.connection, "interrupt", None) or getattr(
                self.connection, "cancel", None
            )
            cursor = self.connection.cursor()
            return self._run_on(cursor, interrupt, sql, *limits)

    def _run_on(
        self,
        cursor: _Cursor,
        interrupt: Any,
        sql: str,
        max_rows: int,
        max_bytes: int,
        limit: TimeLimit,
    ) -> Rows:
        fired = threading.Event()

        def stop() -> None:
            fired.set()
            interrupt()

        # Wall clock: this process's CPU time is every run's, not the query's alone.
        after = limit.wall_s if limit.left_s is None else limit.left_s
        timer = threading.Timer(after, stop) if callable(interrupt) else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            cursor.execute(sql)
            columns = [str(d[0]) for d in cursor.description or ()]
            # DuckDB streams the result, so the query runs while we fetch: still under the timer.
            rows, truncated = fetch_limited(cursor, max_rows, max_bytes) if columns else ([], None)
        except FirstRowTooLargeError:
            raise _first_row_too_large(max_bytes) from None
        except Exception as exc:
            if fired.is_set():
                raise _timed_out(limit, "wall") from None
            names = {cls.__name__ for cls in type(exc).__mro__}
            failure = _classify(names, type(exc).__name__, str(exc))
            if isinstance(failure, DatabaseError):
                raise  # the driver's own exception says most
            raise failure from None
        finally:
            if timer is not None:
                timer.cancel()
            cursor.close()
        return Rows(columns=columns, rows=rows, truncated=truncated)


class _ProcessRunner(_Runner):
    """Runs checked SQL in worker processes holding the DuckDB file, under the same limits;
    a query that does not stop at its time limit is stopped with its process."""

    is_duckdb = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not Path(path).is_file():
            raise UsageError(f"sql_query: no DuckDB database at {os.fspath(path)!r}")
        self.pool = WorkerPool(
            os.fspath(Path(path).resolve()),
            dict(DUCKDB_LOCKDOWN),
            address_space_bytes=DUCKDB_ADDRESS_SPACE,
            max_workers=DUCKDB_WORKERS,
        )
        try:
            self.pool.start()
        except (DatabaseOpenError, WorkerStartError) as exc:
            raise UsageError(
                f"sql_query: cannot open {os.fspath(path)!r} read-only ({exc})"
            ) from None

    def dialect(self) -> str:
        return "duckdb"

    def run(self, sql: str, *, max_rows: int, max_bytes: int, limit: TimeLimit) -> Rows:
        request = {
            "sql": sql,
            "max_rows": max_rows,
            "max_bytes": max_bytes,
            "cpu_limit_s": limit.left_s,
            "hang_after_s": limit.wall_s,
        }
        try:
            reply = self.pool.query(request, limit.wall_s)
        except WorkerOverstayedError:
            raise _timed_out(limit, "hang") from None
        except WorkerBusyError:
            raise DatabaseError(
                f"all {DUCKDB_WORKERS} database workers stayed busy for {limit.wall_s:g} s; "
                "too many queries at once"
            ) from None
        except WorkerStartError as exc:
            raise DatabaseError(f"could not start a database worker: {exc}") from None
        except WorkerDiedError as exc:
            if exc.signal_number == signal.SIGXCPU:  # the kernel's stop at the CPU limit
                raise _timed_out(limit, "cpu") from None
            raise BusinessFailure(
                f"the database engine stopped while running the query ({exc}); a query that "
                f"needs more than the {DUCKDB_ADDRESS_SPACE // 1024**3} GiB allowed ends so. "
                "Make it cheaper: "
                "work on fewer or shorter values, filter earlier, aggregate"
            ) from None
        if reply.get("timed_out"):
            raise _timed_out(limit, reply["timed_out"])
        if reply.get("first_row_too_large"):
            raise _first_row_too_large(max_bytes)
        if "error" in reply:
            error = reply["error"]
            raise _classify(set(error["names"]), error["type"], error["message"])
        return Rows(columns=reply["columns"], rows=reply["rows"], truncated=reply["truncated"])


def _timed_out(limit: TimeLimit, how: str) -> QueryTimeout:
    """`how`: "cpu" (its CPU time), "wall" (wall clock, on a connection) or "hang"."""
    cheaper = "make it cheaper: filter earlier, aggregate, or add LIMIT"
    if how == "hang" or limit.limit_s is None:
        return QueryTimeout(
            f"the query was stopped after {limit.wall_s:g} s of wall-clock time without "
            f"finishing; {cheaper}"
        )
    of = " of CPU time" if how == "cpu" else ""
    return QueryTimeout(
        f"the query was interrupted after {limit.limit_s:g} s{of} (time limit); {cheaper}"
    )


def _first_row_too_large(max_bytes: int) -> BusinessFailure:
    return BusinessFailure(
        f"the first row alone is larger than the result size limit of {max_bytes:,} bytes; "
        "select fewer or shorter columns (for example left(text, 200))"
    )


def _classify(names: set[str], type_name: str, message: str) -> Exception:
    """A query's fault (the model can fix it: BusinessFailure) or the database's (DatabaseError)."""
    if names & _SYSTEM_ERRORS or not names & (_QUERY_ERRORS | {"PermissionException"}):
        return DatabaseError(f"{type_name}: {message.strip()}")
    hint = ""
    if "OutOfMemoryException" in names:
        hint = "; make it cheaper: work on fewer or shorter values, filter earlier, aggregate"
    return BusinessFailure(f"the database rejected the query: {type_name}: {message.strip()}{hint}")


def read_catalog(
    connection: Any, *, dialect: str | None = None, tables: Iterable[str] | None = None
) -> Catalog:
    """The whitelist `sql_query` checks queries against, for calling `check_query` yourself."""
    runner = _runner_for(connection)
    return _read_catalog(runner, dialect or runner.dialect(), tables)[0]


def _read_catalog(
    runner: _Runner, dialect: str, wanted: Iterable[str] | None
) -> tuple[Catalog, dict[str, list[str]]]:
    """The whitelist queries are checked against, and the columns of each table it holds."""
    wanted = None if wanted is None else list(wanted)
    try:
        listing = runner.fetch_all(_LIST_COLUMNS.get(dialect, _LIST_COLUMNS_STANDARD))
    except Exception as exc:
        if wanted is None:
            raise UsageError(
                f"sql_query: cannot list this database's tables ({exc}); pass tables=[...] "
                "naming the ones queries may read"
            ) from None
        return replace(Catalog.of(wanted), **_functions(runner)), {}
    tables: dict[str, TableName] = {}
    columns: dict[str, list[str]] = {}
    for catalog_name, schema, table, column, data_type in listing:
        schema = str(schema) if schema is not None else None
        # DuckDB shows a table off the default schema qualified, as it must be queried.
        default = dialect != "duckdb" or schema in _DEFAULT_SCHEMAS
        display = str(table) if default else f"{schema}.{table}"
        tables.setdefault(
            display,
            TableName(str(table), schema, str(catalog_name) if catalog_name else None, display),
        )
        columns.setdefault(display, []).append(f"{column} {data_type}".strip())
    catalog = Catalog(tuple(tables.values()), **_functions(runner))
    if wanted is not None:
        try:
            catalog = catalog.narrowed(wanted)
        except KeyError as exc:
            raise UsageError(
                f"sql_query: tables=[...] names {exc.args[0]!r}, which is not a table or view "
                f"of this database; it has: {', '.join(catalog.names()) or 'none'}"
            ) from None
        columns = {name: columns[name] for name in catalog.names()}
    return catalog, columns


def _functions(runner: _Runner) -> dict[str, Any]:
    """The Catalog fields about functions: DuckDB vouches for its built-ins free of side
    effects; other engines cannot say, so only the names the guard denies are refused."""
    if not runner.is_duckdb:
        return {}
    rows = runner.fetch_all(_LIST_FUNCTIONS)
    known, unvouched = vet_functions(tuple(tuple(row) for row in rows))
    return {"functions": known, "unvouched": unvouched}


def _schema_listing(tables: dict[str, list[str]]) -> str:
    if not tables:
        return ""
    text = " Tables:"
    for shown, (table, columns) in enumerate(tables.items()):
        entry = f" {table}({', '.join(columns)});"
        if len(text) + len(entry) > _SCHEMA_CHARS:
            return f"{text} … and {len(tables) - shown} more (use SHOW TABLES, DESCRIBE name)."
        text += entry
    return text
