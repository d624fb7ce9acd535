"""Reading a store: runs by filter, one run's whole trace, rebuilt requests, and raw SQL.

Each function takes an open connection (read-only is enough) and returns trace records, so
the CLI, reports and replay share one way of reading.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from agentbench.errors import UsageError
from agentbench.trace._json import loads
from agentbench.trace.errors import NoSuchRunError, RunNotFoundError, StoreFormatError
from agentbench.trace.request_diff import apply_diff, request_hash
from agentbench.trace.schema import (
    ContextDiffRecord,
    EventRecord,
    LlmCallRecord,
    RunRecord,
    RunTrace,
    ToolCallRecord,
    TraceRecord,
)


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def fetch(
    conn: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params or [])
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _records(
    conn: duckdb.DuckDBPyConnection,
    record: type[TraceRecord],
    sql: str,
    params: list[Any] | dict[str, Any],
) -> list[Any]:
    return [record.model_validate(row) for row in fetch(conn, sql, params)]


def list_runs(
    conn: duckdb.DuckDBPyConnection,
    *,
    agent: str | None = None,
    status: str | None = None,
    stop_reason: str | None = None,
    since: datetime | None = None,
    limit: int | None = None,
    conversation_id: str | None = None,
) -> list[RunRecord]:
    """Runs matching every given filter, newest first."""
    where, params = [], []
    filters = (
        ("agent", agent),
        ("status", status),
        ("stop_reason", stop_reason),
        ("conversation_id", conversation_id),
    )
    for column, value in filters:
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        where.append("started_at >= ?")
        params.append(since)
    sql = "SELECT * FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY started_at DESC, run_id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return _records(conn, RunRecord, sql, params)


def resolve_run_id(conn: duckdb.DuckDBPyConnection, text: str, path: Path) -> str:
    """The full id of the run `text` names: an id, or a prefix that only one run has."""
    rows = conn.execute(
        "SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY run_id LIMIT 6", [text]
    ).fetchall()
    ids = [row[0] for row in rows]
    if text in ids:
        return text
    if len(ids) == 1:
        return str(ids[0])
    if not ids:
        total = conn.execute("SELECT count(*) FROM runs").fetchone()
        raise NoSuchRunError(text, path, total[0] if total else 0)
    shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
    raise RunNotFoundError(f"run id prefix {text!r} matches several runs in {path}: {shown}")


def load_run(conn: duckdb.DuckDBPyConnection, run_id: str, path: Path) -> RunTrace:
    runs = _records(conn, RunRecord, "SELECT * FROM runs WHERE run_id = ?", [run_id])
    if not runs:
        resolve_run_id(conn, run_id, path)  # raises the helpful error
    by_seq = "WHERE run_id = ? ORDER BY seq"
    return RunTrace(
        run=runs[0],
        llm_calls=_records(conn, LlmCallRecord, f"SELECT * FROM llm_calls {by_seq}", [run_id]),
        tool_calls=_records(conn, ToolCallRecord, f"SELECT * FROM tool_calls {by_seq}", [run_id]),
        context_diffs=_records(
            conn, ContextDiffRecord, f"SELECT * FROM context_diffs {by_seq}", [run_id]
        ),
        events=_records(conn, EventRecord, f"SELECT * FROM events {by_seq}", [run_id]),
        children=_records(
            conn,
            RunRecord,
            "SELECT * FROM runs WHERE parent_run_id = ? ORDER BY started_at, run_id",
            [run_id],
        ),
    )


_CHILD_TABLES: tuple[tuple[str, type[TraceRecord]], ...] = (
    ("llm_calls", LlmCallRecord),
    ("tool_calls", ToolCallRecord),
    ("context_diffs", ContextDiffRecord),
    ("events", EventRecord),
)
_TREE = """
WITH RECURSIVE tree(run_id) AS (
    SELECT unnest($roots)
    UNION
    SELECT r.run_id FROM runs r JOIN tree t ON r.parent_run_id = t.run_id
)
"""


def load_trees(conn: duckdb.DuckDBPyConnection, roots: list[str]) -> dict[str, RunTrace]:
    """Every stored run under `roots` (the roots, the runs they handed off to, …), whole, by
    run id — in five queries however many runs, since each query has a fixed cost of about
    two milliseconds. Roots the store does not have are simply absent."""
    params = {"roots": list(roots)}
    runs = _records(
        conn,
        RunRecord,
        _TREE + "SELECT * FROM runs WHERE run_id IN (SELECT run_id FROM tree) "
        "ORDER BY started_at, run_id",
        params,  # type: ignore[arg-type]
    )
    rows: dict[str, dict[str, list[Any]]] = {r.run_id: {} for r in runs}
    for table, record in _CHILD_TABLES:
        sql = (
            f"{_TREE}SELECT * FROM {table} WHERE run_id IN (SELECT run_id FROM tree) "
            "ORDER BY run_id, seq"
        )
        for row in fetch(conn, sql, params):
            rows[row["run_id"]].setdefault(table, []).append(record.model_validate(row))
    children: dict[str, list[RunRecord]] = {}
    for run in runs:
        if run.parent_run_id:
            children.setdefault(run.parent_run_id, []).append(run)
    return {
        run.run_id: RunTrace(
            run=run,
            **rows[run.run_id],
            children=children.get(run.run_id, []),
        )
        for run in runs
    }


def rebuild_requests(
    conn: duckdb.DuckDBPyConnection, run_id: str, path: Path, *, upto: int | None = None
) -> dict[int, dict[str, Any]]:
    """Every stored request of a run (up to seq `upto`), rebuilt from its diffs, by seq.

    Each rebuilt request is checked against its stored hash, so a damaged trace is reported
    rather than silently replayed.
    """
    sql = "SELECT seq, purpose, request_diff, request_hash FROM llm_calls WHERE run_id = ?"
    params: list[Any] = [run_id]
    if upto is not None:
        sql += " AND seq <= ?"
        params.append(upto)
    rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
    return requests_from_rows(rows, f"{path}: run {run_id}")


def requests_from_rows(
    rows: Iterable[tuple[int, str, str, str]], where: str
) -> dict[int, dict[str, Any]]:
    """Requests rebuilt from (seq, purpose, request_diff, request_hash) rows in seq order.

    Each rebuilt request is checked against its stored hash; `where` names the run in the
    error a damaged trace raises.
    """
    previous: dict[str, dict[str, Any]] = {}
    rebuilt: dict[int, dict[str, Any]] = {}
    for seq, purpose, diff, expected in rows:
        request = apply_diff(previous.get(purpose), loads(diff))
        if request_hash(request) != expected:
            raise StoreFormatError(
                f"{where} llm call seq {seq}: the rebuilt request does not match "
                "its stored hash (the trace is damaged)"
            )
        previous[purpose] = rebuilt[seq] = request
    return rebuilt


def rebuild_request(
    conn: duckdb.DuckDBPyConnection, run_id: str, seq: int, path: Path
) -> dict[str, Any]:
    requests = rebuild_requests(conn, run_id, path, upto=seq)
    if seq not in requests:
        known = ", ".join(str(s) for s in requests) or "none"
        raise RunNotFoundError(
            f"run {run_id} in {path} has no llm call with seq {seq} (llm call seqs: {known})"
        )
    return requests[seq]


def run_sql(conn: duckdb.DuckDBPyConnection, query: str) -> QueryResult:
    """Run a query on a read-only connection; bad SQL and writes are usage errors."""
    try:
        cursor = conn.execute(query)
        columns = [d[0] for d in cursor.description or ()]
        rows = cursor.fetchall() if columns else []
    except duckdb.Error as exc:
        message = str(exc)
        if "read-only" in message:
            raise UsageError(f"traces sql is read-only: {message}") from None
        raise UsageError(f"SQL error: {message}") from None
    return QueryResult(columns, rows)
