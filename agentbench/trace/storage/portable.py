"""Export and import: a store as a folder of Parquet files, optionally a date-partitioned lake.

`export_parquet` writes one Parquet file per table (`runs.parquet`, …, `evals.parquet`,
`results.parquet`) or, partitioned by the run's start date, a Hive-style tree
(`runs/date=2025-01-31/…parquet`) that DuckDB, Spark and Trino read as a table; `eval_id=`
exports one eval's slice (its runs, its results, its row). A `manifest.json`, written last,
says what the folder holds (format version, schema version, row counts); `import_parquet`
refuses folders without one or whose counts do not match, and skips runs the store already
has, so importing twice is harmless.

Evals merge rather than skip: the shards of one eval (`run --shard K/N`, one eval id) arrive
as separate stores or exports, each with the eval's row and its part of the results, so a
result is added unless the store has that very row, and an eval the store has already takes
the earliest start, the latest finish and the union of the shards it was run in. Its
summary is the evals layer's to recompute (`evals.storage.merging`).
"""

from __future__ import annotations

import contextlib
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson

from agentbench._version import __version__
from agentbench.trace.errors import StoreFormatError
from agentbench.trace.schema import INSERT_ORDER, TABLES
from agentbench.trace.storage.faults import fault_errno, roll_back
from agentbench.trace.storage.migrations import LATEST
from agentbench.yaml_source import file_kind

FORMAT = "agentbench-traces"
FORMAT_VERSION = 1
# An eval's own tables, beside the runs: in every export since schema 7 (older exports have
# none, and import without them).
EVAL_TABLES = ("evals", "results")
_EVAL_ORDER = {"evals": "eval_id", "results": "eval_id, suite, case_id, trial, recorded_at"}
_EVAL_DATE = {"evals": "started_at", "results": "recorded_at"}
# A result row is the same row when all of these are (a re-merged shard adds nothing).
_RESULT_KEY = ("eval_id", "suite", "case_id", "trial", "run_id", "recorded_at")
# The name a merged store is attached under: DuckDB names the target after its file's stem
# (a target called merged.duckdb is `merged`), so the source's must be one no file gets.
_SOURCE = "agentbench_merge_source__"
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 2**20


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _rows(table: str, eval_id: str | None) -> str:
    """The table's rows to export: all, or one eval's (its runs, their rows, its results)."""
    if eval_id is None:
        return f"SELECT * FROM {table}"
    quoted = "'" + eval_id.replace("'", "''") + "'"
    if table in EVAL_TABLES or table == "runs":
        return f"SELECT * FROM {table} WHERE eval_id = {quoted}"
    return (
        f"SELECT * FROM {table} WHERE run_id IN (SELECT run_id FROM runs WHERE eval_id = {quoted})"
    )


def _dated(table: str, eval_id: str | None) -> str:
    """The table's rows with their date, the partition key: a run's start (its rows go with
    it), an eval's start, a result's recording."""
    if table in EVAL_TABLES:
        return f"SELECT *, CAST({_EVAL_DATE[table]} AS DATE) AS date FROM ({_rows(table, eval_id)})"
    if table == "runs":
        return f"SELECT *, CAST(started_at AS DATE) AS date FROM ({_rows(table, eval_id)})"
    return (
        f"SELECT t.*, CAST(r.started_at AS DATE) AS date FROM ({_rows(table, eval_id)}) t "
        "LEFT JOIN runs r ON r.run_id = t.run_id"
    )


def _order(table: str) -> str:
    return _EVAL_ORDER.get(table) or ("run_id" if table == "runs" else "run_id, seq")


def export_parquet(
    conn: duckdb.DuckDBPyConnection,
    directory: Path,
    *,
    partition_by_date: bool = False,
    eval_id: str | None = None,
) -> dict[str, Any]:
    """Write every table (or one eval's slice) to `directory`, which must be new or empty;
    return the manifest."""
    if directory.exists() and any(directory.iterdir()):
        raise StoreFormatError(f"export folder {directory} is not empty: choose a new folder")
    directory.mkdir(parents=True, exist_ok=True)
    tables: dict[str, dict[str, Any]] = {}
    for table in (*TABLES, *EVAL_TABLES):
        row = conn.execute(f"SELECT count(*) FROM ({_rows(table, eval_id)})").fetchone()
        count = int(row[0]) if row else 0
        if partition_by_date:
            target = directory / table
            if count:
                conn.execute(
                    f"COPY ({_dated(table, eval_id)} ORDER BY {_order(table)}) TO "
                    f"{_literal(target)} (FORMAT parquet, PARTITION_BY (date))"
                )
            location = table
        else:
            target = directory / f"{table}.parquet"
            conn.execute(
                f"COPY ({_rows(table, eval_id)} ORDER BY {_order(table)}) TO "
                f"{_literal(target)} (FORMAT parquet)"
            )
            location = target.name
        tables[table] = {"rows": count, "path": location}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "schema_version": LATEST,
        "partition_by": "date" if partition_by_date else None,
        "exported_at": datetime.now(UTC).isoformat(),
        "eval_id": eval_id,
        "agentbench": __version__,
        "tables": tables,
    }
    (directory / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return manifest


def read_manifest(directory: Path) -> dict[str, Any]:
    """The folder's manifest, refused (StoreFormatError naming the file) unless this version
    wrote it the way `export_parquet` does: checked before the store is locked or touched."""
    path = directory / MANIFEST
    if not path.is_file():
        raise StoreFormatError(
            f"{directory} has no {MANIFEST}: expected a folder written by "
            "`agentbench traces export`"
        )
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise StoreFormatError(
                f"{path}: over {MAX_MANIFEST_BYTES:,} bytes; an export's manifest is a few hundred"
            )
        manifest = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise StoreFormatError(f"{path}: cannot read the file: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise StoreFormatError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StoreFormatError(f"{path}: format is not {FORMAT!r}; not an agentbench export")
    version = manifest.get("format_version")
    if type(version) is int and version > FORMAT_VERSION:
        raise StoreFormatError(
            f"{path}: export format {version} is newer than this "
            f"agentbench reads ({FORMAT_VERSION}): upgrade agentbench"
        )
    if type(version) is not int or version < 1:
        raise StoreFormatError(
            f"{path}: format_version {version!r} is not an export format this agentbench "
            f"reads (known: 1 to {FORMAT_VERSION})"
        )
    schema = manifest.get("schema_version")
    if type(schema) is int and schema > LATEST:
        raise StoreFormatError(
            f"{path}: written with store schema {schema}, newer than "
            f"this agentbench knows ({LATEST}): upgrade agentbench"
        )
    if type(schema) is not int or schema < 1:
        raise StoreFormatError(f"{path}: schema_version {schema!r}: expected 1 to {LATEST}")
    _check_entries(path, manifest)
    return manifest


def _check_entries(path: Path, manifest: dict[str, Any]) -> None:
    """Every table the manifest lists is a store table with a row count and a path inside
    the folder: a manifest must not point the import at files elsewhere on the disk."""
    if manifest.get("partition_by") not in (None, "date"):
        raise StoreFormatError(
            f"{path}: partition_by {manifest.get('partition_by')!r}: expected null or 'date'"
        )
    tables = manifest.get("tables")
    if not isinstance(tables, dict):
        raise StoreFormatError(f"{path}: tables: expected a mapping of table to rows and path")
    folder = path.parent.resolve()
    for table, entry in tables.items():
        if table not in TABLES and table not in EVAL_TABLES:
            raise StoreFormatError(
                f"{path}: tables.{table}: not a table of the store "
                f"({', '.join((*TABLES, *EVAL_TABLES))})"
            )
        rows = entry.get("rows") if isinstance(entry, dict) else None
        location = entry.get("path") if isinstance(entry, dict) else None
        if type(rows) is not int or rows < 0 or not isinstance(location, str) or not location:
            raise StoreFormatError(
                f"{path}: tables.{table}: expected {{rows: a count, path: a file or folder}}"
            )
        target = (path.parent / location).resolve()
        if target != folder and folder not in target.parents:
            raise StoreFormatError(
                f"{path}: tables.{table}.path {location!r} is outside the export folder"
            )


def _files(directory: Path, entry: dict[str, Any], partitioned: bool) -> list[Path]:
    """A table's Parquet files; StoreFormatError for one that is no regular file (DuckDB
    would wait on a named pipe forever, or read a device without end)."""
    file = directory / entry["path"]
    found = sorted(file.glob("**/*.parquet")) if partitioned else [file] if file.exists() else []
    for path in found:
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise StoreFormatError(f"{path}: cannot read the file: {exc.strerror}") from None
        if not stat.S_ISREG(mode):
            raise StoreFormatError(
                f"{path}: not a regular file ({file_kind(mode)}); expected Parquet"
            )
    return found


def _check_files(
    conn: duckdb.DuckDBPyConnection, directory: Path, manifest: dict[str, Any]
) -> None:
    """Each listed table's files are there, are Parquet, and have the store table's columns;
    checked before anything is inserted, so the error names the file at fault."""
    partitioned = manifest.get("partition_by") == "date"
    current = manifest.get("schema_version") == LATEST
    for table, entry in manifest["tables"].items():
        if not entry["rows"]:
            continue
        files = _files(directory, entry, partitioned)
        if not files:
            raise StoreFormatError(
                f"{directory / entry['path']}: missing; the manifest lists {entry['rows']} "
                f"{table} row(s) there"
            )
        wanted = {row[0] for row in conn.execute(f"DESCRIBE {table}").fetchall()}
        for file in files:
            try:
                found = conn.execute(f"DESCRIBE SELECT * FROM read_parquet({_literal(file)})")
                columns = {row[0] for row in found.fetchall()} - {"date"}
            except duckdb.Error as exc:
                raise StoreFormatError(
                    f"{file}: not a readable Parquet file ({_first_line(exc)})"
                ) from None
            unknown = sorted(columns - wanted)
            # An export of an older schema may lack newer columns; they import as NULL.
            missing = sorted(wanted - columns) if current else []
            if unknown or missing:
                wrong = [f"missing {', '.join(missing)}"] if missing else []
                wrong += [f"unexpected {', '.join(unknown)}"] if unknown else []
                raise StoreFormatError(
                    f"{file}: its columns are not those of the store's {table} table "
                    f"({'; '.join(wrong)})"
                )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _source(directory: Path, entry: dict[str, Any], partitioned: bool) -> str:
    if partitioned:
        files = _literal(directory / entry["path"] / "**" / "*.parquet")
        return (
            f"(SELECT * EXCLUDE (date) FROM read_parquet({files}, hive_partitioning = true, "
            "union_by_name = true))"
        )
    return f"read_parquet({_literal(directory / entry['path'])})"


def import_parquet(conn: duckdb.DuckDBPyConnection, directory: Path) -> dict[str, int]:
    """Add an export's rows to the store, skipping runs it already has; counts per table.

    All or nothing: a damaged export (a missing or truncated file, other columns, counts that
    do not match the manifest) is refused with the file named, and the store is unchanged.
    """
    manifest = read_manifest(directory)
    _check_files(conn, directory, manifest)
    partitioned = manifest.get("partition_by") == "date"
    entries: dict[str, dict[str, Any]] = manifest["tables"]
    inserted: dict[str, int] = {}
    conn.execute("BEGIN")
    where = directory
    try:
        for table in INSERT_ORDER:  # child rows first, while `runs` still shows what is new
            entry = entries.get(table)
            if entry is None or not entry["rows"]:
                inserted[table] = 0
                continue
            where = directory / entry["path"]
            source = _source(directory, entry, partitioned)
            found = conn.execute(f"SELECT count(*) FROM {source}").fetchone()
            if not found or found[0] != entry["rows"]:
                raise StoreFormatError(
                    f"{where}: {table} has {found[0] if found else 0} rows but the "
                    f"manifest says {entry['rows']}: the export is incomplete or was changed"
                )
            before = _count(conn, table)
            conn.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM {source} "
                "WHERE run_id NOT IN (SELECT run_id FROM runs)"
            )
            inserted[table] = _count(conn, table) - before
        for table in EVAL_TABLES:
            entry = entries.get(table)
            if entry is None or not entry["rows"]:
                inserted[table] = 0
                continue
            where = directory / entry["path"]
            inserted[table] = _merge_eval_table(conn, table, _source(directory, entry, partitioned))
        conn.execute("COMMIT")
    except duckdb.Error as exc:
        roll_back(conn)
        if fault_errno(exc) is not None:
            raise  # the store's disk, not the folder: told as the store's fault
        raise StoreFormatError(f"cannot import {where}: {_first_line(exc)}") from None
    except BaseException:
        roll_back(conn)
        raise
    return inserted


def _count(conn: duckdb.DuckDBPyConnection, table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def merge_store(conn: duckdb.DuckDBPyConnection, source: Path) -> dict[str, int]:
    """Add every run, eval and result of the store file `source` (at the current schema) to
    the store `conn` writes; runs and evals it already has are skipped. Counts per table."""
    conn.execute(f"ATTACH {_literal(source)} AS {_SOURCE} (READ_ONLY)")
    inserted: dict[str, int] = {}
    try:
        conn.execute("BEGIN")
        try:
            for table in INSERT_ORDER:  # child rows first, while `runs` still shows what is new
                inserted[table] = _merge(
                    conn, table, "WHERE run_id NOT IN (SELECT run_id FROM main.runs)"
                )
            for table in EVAL_TABLES:
                inserted[table] = _merge_eval_table(conn, table, f"{_SOURCE}.{table}")
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise
    finally:
        with contextlib.suppress(duckdb.Error):  # an invalidated database cannot detach
            conn.execute(f"DETACH {_SOURCE}")
    return inserted


def _merge(conn: duckdb.DuckDBPyConnection, table: str, where: str) -> int:
    before = _count(conn, table)
    conn.execute(f"INSERT INTO main.{table} BY NAME SELECT * FROM {_SOURCE}.{table} {where}")
    return _count(conn, table) - before


def _merge_eval_table(conn: duckdb.DuckDBPyConnection, table: str, source: str) -> int:
    """Add an eval table's rows from `source` (a query or table): results the store lacks,
    evals it lacks, and for evals it has, the span and shards of both (see the docstring)."""
    before = _count(conn, table)
    if table == "results":
        same = " AND ".join(f"r.{key} IS NOT DISTINCT FROM s.{key}" for key in _RESULT_KEY)
        conn.execute(
            f"INSERT INTO main.results BY NAME SELECT * FROM {source} s "
            f"WHERE NOT EXISTS (SELECT 1 FROM main.results r WHERE {same})"
        )
        return _count(conn, table) - before
    incoming = conn.execute(f"SELECT * FROM {source}")
    names = [d[0] for d in incoming.description]
    for values in incoming.fetchall():
        row = dict(zip(names, values, strict=True))
        have = conn.execute(
            "SELECT started_at, finished_at, status, config FROM main.evals WHERE eval_id = ?",
            [row["eval_id"]],
        ).fetchone()
        if have is None:
            columns = [name for name in names if name != "date"]
            conn.execute(
                f"INSERT INTO main.evals ({', '.join(columns)}) VALUES "
                f"({', '.join('?' for _ in columns)})",
                [row[name] for name in columns],
            )
            continue
        started, finished, status, config = have
        conn.execute(
            "UPDATE main.evals SET started_at = ?, finished_at = ?, status = ?, config = ? "
            "WHERE eval_id = ?",
            [
                min(started, row["started_at"]),
                _latest(finished, row["finished_at"]),
                "finished" if status == row["status"] == "finished" else "running",
                _merged_config(config, row["config"]),
                row["eval_id"],
            ],
        )
    return _count(conn, table) - before


def _latest(one: Any, other: Any) -> Any:
    return other if one is None else one if other is None else max(one, other)


def _merged_config(mine: str | None, theirs: str | None) -> str | None:
    """An eval's config with the shards of both copies listed once, and the trials each
    shard planned (`planned_trials`, by shard) of both."""
    if mine is None or theirs is None:
        return mine or theirs
    a, b = orjson.loads(mine), orjson.loads(theirs)
    shards = sorted(
        set(a.get("shards") or []) | set(b.get("shards") or []),
        key=lambda s: [int(p) for p in str(s).split("/")] if "/" in str(s) else [0],
    )
    if shards:
        a["shards"] = shards
    plans = {**(b.get("planned_trials") or {}), **(a.get("planned_trials") or {})}
    if plans:
        a["planned_trials"] = plans
    return orjson.dumps(a).decode()
