"""Reading a journal's lines back into rows, line by line, keeping every good line.

A journal line is a JSON object: `{"start": row}` when a run starts, `{"run": {table: rows}}`
when it finishes (or eval results are kept), and for a long run `{"part": {table: rows}}`
lines in between with rows it has finished (they count only once its `run` line is there:
a run that never finished is stored as `incomplete`, as one without parts is). Each line is
checked on its own — valid JSON, a
known record, timestamps that parse, every column of the stored type, no required column
missing — so one damaged line (a bad timestamp, a start record without a run id, garbage from
a disk error) costs that line only; the problems are listed with their line numbers. A torn
last line (a `kill -9` mid-write) is expected and is not a problem: its run never finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa

from agentbench.trace.schema import (
    ARROW_SCHEMAS,
    CHILD_TABLES,
    RESULTS_SCHEMA,
    TIMESTAMP_COLUMNS,
    RunRows,
)

_SCHEMAS = {**ARROW_SCHEMAS, "results": RESULTS_SCHEMA}
# What a line that is wrong can raise on its way to Arrow: nothing else is the line's fault.
_LINE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, pa.ArrowException)


@dataclass
class ParsedJournal:
    """The rows of a journal's good lines, and what was wrong with the others."""

    rows: RunRows = field(default_factory=RunRows)
    finished: int = 0
    incomplete: int = 0
    problems: list[str] = field(default_factory=list)
    torn_tail: int = 0  # bytes of an unfinished last line (ignored)

    def run_ids(self) -> set[str]:
        return {row["run_id"] for row in self.rows.runs}


def parse_journal(data: bytes) -> ParsedJournal:
    """Every good line's rows; runs that only started come back as `incomplete` rows."""
    parsed = ParsedJournal()
    lines = data.split(b"\n")
    tail = lines.pop()
    if tail:
        if tail.lstrip().startswith(b"{"):
            parsed.torn_tail = len(tail)
        else:  # not a record cut short by a crash: bytes that were never a record
            parsed.problems.append(f"line {len(lines) + 1}: {_preview(tail)} is not a record")
    started: dict[str, dict[str, Any]] = {}
    finished: set[str] = set()
    parts: list[RunRows] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            kind, rows = _record(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            parsed.problems.append(f"line {number}: not valid JSON ({exc}): {_preview(line)}")
            continue
        except _LINE_ERRORS as exc:
            parsed.problems.append(f"line {number}: {_reason(exc)}")
            continue
        if kind == "start":
            started[rows.runs[0]["run_id"]] = rows.runs[0]
        elif kind == "part":
            parts.append(rows)
        else:
            finished.update(row["run_id"] for row in rows.runs)
            parsed.rows.extend(rows)
    for rows in parts:  # a run's parts, if the run finished
        for name in CHILD_TABLES:
            parsed.rows.table(name).extend(r for r in rows.table(name) if r["run_id"] in finished)
    incomplete = [row for run_id, row in started.items() if run_id not in finished]
    parsed.rows.runs.extend(incomplete)
    parsed.finished, parsed.incomplete = len(finished), len(incomplete)
    return parsed


def parse_part(line: bytes) -> RunRows:
    """The rows of a `part` line this process wrote, read back to be stored: rows its own
    recorder made, so they are not checked column by column as a dead process's are."""
    record = orjson.loads(line)
    body = record.get("part") if isinstance(record, dict) else None
    if not isinstance(body, dict) or not set(body) <= set(CHILD_TABLES):
        raise ValueError(f"expected a part record, found {_preview(line)}")
    return RunRows.from_dict(
        {name: [_decoded(name, row) for row in table] for name, table in body.items()}
    )


def _record(record: Any) -> tuple[str, RunRows]:
    """One line's rows, checked against the stored schema; ValueError says what is wrong."""
    if not isinstance(record, dict) or len(record) != 1:
        raise ValueError('expected one {"start": …} or {"run": …} object')
    ((kind, body),) = record.items()
    if kind == "start":
        if not isinstance(body, dict) or not isinstance(body.get("run_id"), str):
            raise ValueError("a start record without a run_id")
        rows = RunRows(runs=[_decoded("runs", body)])
    elif kind in ("run", "part"):
        tables = _SCHEMAS if kind == "run" else CHILD_TABLES
        if not isinstance(body, dict) or not set(body) <= set(tables):
            raise ValueError(f"a {kind} record with unknown tables: {sorted(body)[:5]}")
        rows = RunRows.from_dict(
            {name: [_decoded(name, row) for row in table] for name, table in body.items()}
        )
    else:
        raise ValueError(f"unknown record kind {kind!r}")
    _check_columns(rows)
    return kind, rows


def _decoded(table: str, row: Any) -> dict[str, Any]:
    """A journal row back to Python values: timestamps were written as ISO 8601 text."""
    if not isinstance(row, dict):
        raise ValueError(f"a {table} row that is not an object")
    for column in TIMESTAMP_COLUMNS[table]:
        value = row.get(column)
        if isinstance(value, str):
            try:
                row[column] = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{table}.{column} is not a timestamp: {value!r}") from None
    return row


def _check_columns(rows: RunRows) -> None:
    """What DuckDB would refuse, refused here, so it costs this line and not the batch."""
    for name, schema in _SCHEMAS.items():
        table = rows.table(name)
        for column in schema:
            values = [row.get(column.name) for row in table]
            try:
                array = pa.array(values, type=column.type)
            except (pa.ArrowException, TypeError, ValueError) as exc:
                raise ValueError(f"{name}.{column.name} is not {column.type}: {exc}") from None
            if not column.nullable and array.null_count:
                raise ValueError(f"{name}.{column.name} is missing")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc}"
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _preview(line: bytes) -> str:
    return repr(line[:60]) + ("…" if len(line) > 60 else "")
