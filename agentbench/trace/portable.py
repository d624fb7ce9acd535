"""Export and import: a store as a folder of Parquet files, optionally a date-partitioned lake.

`export_parquet` writes one Parquet file per table (`runs.parquet`, …) or, partitioned by the
run's start date, a Hive-style tree (`runs/date=2025-01-31/…parquet`) that DuckDB, Spark and
Trino read as a table. A `manifest.json`, written last, says what the folder holds (format
version, schema version, row counts); `import_parquet` refuses folders without one or whose
counts do not match, and skips runs the store already has, so importing twice is harmless.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson

from agentbench._version import __version__
from agentbench.trace.errors import StoreFormatError
from agentbench.trace.migrations import LATEST
from agentbench.trace.schema import INSERT_ORDER, TABLES

FORMAT = "agentbench-traces"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 2**20


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _dated(table: str) -> str:
    """The table's rows with the date of their run's start, the partition key."""
    if table == "runs":
        return "SELECT *, CAST(started_at AS DATE) AS date FROM runs"
    return (
        f"SELECT t.*, CAST(r.started_at AS DATE) AS date FROM {table} t "
        "LEFT JOIN runs r ON r.run_id = t.run_id"
    )


def export_parquet(
    conn: duckdb.DuckDBPyConnection, directory: Path, *, partition_by_date: bool = False
) -> dict[str, Any]:
    """Write every table to `directory` (which must be new or empty); return the manifest."""
    if directory.exists() and any(directory.iterdir()):
        raise StoreFormatError(f"export folder {directory} is not empty: choose a new folder")
    directory.mkdir(parents=True, exist_ok=True)
    tables: dict[str, dict[str, Any]] = {}
    for table in TABLES:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        count = int(row[0]) if row else 0
        order = "run_id" if table == "runs" else "run_id, seq"
        if partition_by_date:
            target = directory / table
            if count:
                conn.execute(
                    f"COPY ({_dated(table)} ORDER BY {order}) TO {_literal(target)} "
                    "(FORMAT parquet, PARTITION_BY (date))"
                )
            location = table
        else:
            target = directory / f"{table}.parquet"
            conn.execute(
                f"COPY (SELECT * FROM {table} ORDER BY {order}) TO {_literal(target)} "
                "(FORMAT parquet)"
            )
            location = target.name
        tables[table] = {"rows": count, "path": location}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "schema_version": LATEST,
        "partition_by": "date" if partition_by_date else None,
        "exported_at": datetime.now(UTC).isoformat(),
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
        if table not in TABLES:
            raise StoreFormatError(
                f"{path}: tables.{table}: not a table of the store ({', '.join(TABLES)})"
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
    if partitioned:
        return sorted((directory / entry["path"]).glob("**/*.parquet"))
    file = directory / entry["path"]
    return [file] if file.is_file() else []


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
        conn.execute("COMMIT")
    except duckdb.Error as exc:
        conn.execute("ROLLBACK")
        raise StoreFormatError(f"cannot import {where}: {_first_line(exc)}") from None
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return inserted


def _count(conn: duckdb.DuckDBPyConnection, table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def merge_store(conn: duckdb.DuckDBPyConnection, source: Path) -> dict[str, int]:
    """Add every run, eval and result of the store file `source` (at the current schema) to
    the store `conn` writes; runs and evals it already has are skipped. Counts per table."""
    conn.execute(f"ATTACH {_literal(source)} AS merged (READ_ONLY)")
    inserted: dict[str, int] = {}
    try:
        conn.execute("BEGIN")
        try:
            for table in INSERT_ORDER:  # child rows first, while `runs` still shows what is new
                inserted[table] = _merge(
                    conn, table, "WHERE run_id NOT IN (SELECT run_id FROM main.runs)"
                )
            inserted["results"] = _merge(
                conn, "results", "WHERE eval_id NOT IN (SELECT eval_id FROM main.evals)"
            )
            inserted["evals"] = _merge(
                conn, "evals", "WHERE eval_id NOT IN (SELECT eval_id FROM main.evals)"
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute("DETACH merged")
    return inserted


def _merge(conn: duckdb.DuckDBPyConnection, table: str, where: str) -> int:
    before = _count(conn, table)
    conn.execute(f"INSERT INTO main.{table} BY NAME SELECT * FROM merged.{table} {where}")
    return _count(conn, table) - before
