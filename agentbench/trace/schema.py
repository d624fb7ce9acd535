"""The trace model: one pydantic record per stored row, and the Arrow schemas derived from it.

Tables: `runs` (one row per agent run), `llm_calls` (per model call, the request
stored as a diff), `tool_calls` (per tool call, including rejected ones), `context_diffs` (per
changed context variable) and `events` (every other event kind, as a JSON payload, so kinds
added later are kept without code changes). Every row carries the run id and the `seq` of the
event it came from, so a run's timeline is all its rows ordered by `seq`. A child row's
`agent` is set only when its event's agent is not the run's: a boundary target's framework may
pass control between agents inside one run, where the runtime starts a child run; NULL (every
row of the runtime's, and every row stored before schema 9) means the run's agent.

Columns typed `JsonText` hold JSON text (DuckDB: `col->>'$.field'` reads into them). The
migrations in `migrations.py` create the same columns; a test keeps the two in step.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from agentbench.trace._json import loads


class _JsonMarker:
    """Marks a text column that holds JSON."""


JsonText = Annotated[str, _JsonMarker()]


class RunStatus(enum.StrEnum):
    """How a run ended, coarser than its stop reason; `incomplete`: it never finished."""

    COMPLETED = "completed"  # stop reason completed or handoff
    STOPPED = "stopped"  # a brake or a business stop ended it
    ERROR = "error"
    CANCELLED = "cancelled"
    INCOMPLETE = "incomplete"  # started, then the process died


_STATUS_OF_STOP = {
    "completed": RunStatus.COMPLETED,
    "handoff": RunStatus.COMPLETED,
    "error": RunStatus.ERROR,
    "cancelled": RunStatus.CANCELLED,
}


def status_of(stop_reason: str | None) -> RunStatus:
    if stop_reason is None:
        return RunStatus.INCOMPLETE
    return _STATUS_OF_STOP.get(stop_reason, RunStatus.STOPPED)


class TraceRecord(BaseModel):
    """A stored row. Subclasses name their table."""

    model_config = ConfigDict(extra="forbid")
    table: ClassVar[str]

    @classmethod
    def json_columns(cls) -> list[str]:
        hints = typing.get_type_hints(cls, include_extras=True)
        return [name for name in cls.model_fields if _column(hints[name])[2]]

    def decoded(self) -> dict[str, Any]:
        """The row as a dict with JSON columns parsed (for `--json` output and reports)."""
        row = self.model_dump(mode="json")
        for name in self.json_columns():
            row[name] = loads(row[name])
        return row


class RunRecord(TraceRecord):
    table: ClassVar[str] = "runs"

    run_id: str
    parent_run_id: str | None = None
    eval_id: str | None = None
    case_id: str | None = None
    trial: int | None = None
    agent: str
    model: str | None = None
    input: JsonText | None = None
    output: JsonText | None = None
    status: str
    stop_reason: str | None = None
    error: JsonText | None = None
    started_at: datetime
    finished_at: datetime | None = None
    duration_ms: float | None = None
    iterations: int | None = None
    llm_calls: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    code_version: str | None = None
    context: JsonText | None = None
    replay_of: str | None = None  # the run this one replayed (agentbench replay)
    finished_seq: int | None = None  # seq of RunFinished
    usage_estimated: bool | None = None  # some tokens counted by us: the server reported none
    request_id: str | None = None  # served runs (`agentbench serve`): the HTTP request id,
    conversation_id: str | None = None  # the client's conversation id,
    agent_ref: str | None = None  # and the module:attribute that served it
    origin: JsonText | None = None  # an imported run (`traces import-otel`): file, trace, source
    not_replayable: str | None = None  # why an imported run cannot be replayed (no content)
    caller: str | None = None  # served runs: the name of the key that started it


class LlmCallRecord(TraceRecord):
    table: ClassVar[str] = "llm_calls"

    run_id: str
    seq: int
    step: int | None = None
    purpose: str = "agent"
    ts: datetime
    model: str | None = None
    request_diff: JsonText
    request_hash: str
    messages: int
    messages_added: int
    messages_dropped: int
    response: JsonText | None = None
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None
    attempts: int | None = None
    response_seq: int | None = None  # seq and time of the ModelResponse
    response_ts: datetime | None = None
    agent: str | None = None  # the step's agent when it is not the run's (module docstring)


class ToolCallRecord(TraceRecord):
    table: ClassVar[str] = "tool_calls"

    run_id: str
    seq: int
    step: int | None = None
    ts: datetime
    call_id: str
    tool: str
    arguments: JsonText | None = None
    result_kind: str | None = None  # ok, business_failure, system_error, rejected; None: unfinished
    result: JsonText | None = None
    error: str | None = None
    effect: str | None = None
    duration_ms: float | None = None
    truncated: bool | None = None
    stops_run: bool | None = None
    # seq and time of the ToolFinished (or of the rejection); equal to `seq` when no
    # ToolStarted came first
    finished_seq: int | None = None
    finished_ts: datetime | None = None
    agent: str | None = None


class ContextDiffRecord(TraceRecord):
    table: ClassVar[str] = "context_diffs"

    run_id: str
    seq: int
    step: int | None = None
    ts: datetime
    scope: str
    key: str
    op: str
    old: JsonText | None = None
    new: JsonText | None = None
    agent: str | None = None


class EventRecord(TraceRecord):
    table: ClassVar[str] = "events"

    run_id: str
    seq: int
    step: int | None = None
    ts: datetime
    kind: str
    payload: JsonText
    agent: str | None = None


RECORDS: dict[str, type[TraceRecord]] = {
    r.table: r for r in (RunRecord, LlmCallRecord, ToolCallRecord, ContextDiffRecord, EventRecord)
}
TABLES: tuple[str, ...] = tuple(RECORDS)
# A run's own rows, in the tables other than `runs` (what a long run's parts hold).
CHILD_TABLES: tuple[str, ...] = TABLES[1:]
# Child tables before `runs`: a run row is what marks a run as stored.
INSERT_ORDER: tuple[str, ...] = (*CHILD_TABLES, TABLES[0])


_ARROW_TYPES: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def _column(annotation: Any) -> tuple[pa.DataType, bool, bool]:
    """Arrow type of a field annotation, whether it is nullable, whether it holds JSON."""
    nullable = False
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        nullable = len(members) < len(get_args(annotation))
        annotation = members[0]
    is_json = False
    if get_origin(annotation) is Annotated:
        annotation, *metadata = get_args(annotation)
        is_json = any(isinstance(m, _JsonMarker) for m in metadata)
    return _ARROW_TYPES[annotation], nullable, is_json


def arrow_schema(record: type[TraceRecord]) -> pa.Schema:
    hints = typing.get_type_hints(record, include_extras=True)
    fields = []
    for name in record.model_fields:
        kind, nullable, _ = _column(hints[name])
        fields.append(pa.field(name, kind, nullable=nullable))
    return pa.schema(fields)


ARROW_SCHEMAS: dict[str, pa.Schema] = {name: arrow_schema(r) for name, r in RECORDS.items()}
TIMESTAMP_COLUMNS: dict[str, tuple[str, ...]] = {
    name: tuple(f.name for f in schema if pa.types.is_timestamp(f.type))
    for name, schema in ARROW_SCHEMAS.items()
}


# Scored results of evals (the `results` table, filled by `agentbench.evals`): journaled and
# stored like runs, so a result is as durable as the run it scored.
RESULTS_SCHEMA = pa.schema(
    [
        pa.field("eval_id", pa.string(), nullable=False),
        pa.field("suite", pa.string(), nullable=False),
        pa.field("case_id", pa.string(), nullable=False),
        pa.field("trial", pa.int64(), nullable=False),
        pa.field("run_id", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("passed", pa.bool_(), nullable=False),
        pa.field("score", pa.float64()),
        pa.field("scores", pa.string()),
        pa.field("duration_ms", pa.float64()),
        pa.field("tokens", pa.int64()),
        pa.field("cost_usd", pa.float64()),
        pa.field("error", pa.string()),
        pa.field("source", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("details", pa.string()),
    ]
)
_WITH_RESULTS = (*TABLES, "results")
TIMESTAMP_COLUMNS["results"] = ("recorded_at",)


@dataclass
class RunRows:
    """Rows of one or more runs, by table, as plain dicts (the recorder's output), and any
    eval results that travel with them. `parts`: more rows of these runs that are not held
    here but kept in a journal (a long run's), each read back when it is stored."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    context_diffs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    parts: list[Callable[[], RunRows]] = field(default_factory=list)
    # Runs to mask again as they are stored, by id: the redaction rules (learned secrets
    # made literal) of a long run whose parts went to the journal before it learned a secret
    # (see `redaction.remask`). In memory only: never journaled.
    remask: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = getattr(self, name)
        return rows

    def is_empty(self) -> bool:
        return not self.parts and not any(self.table(name) for name in _WITH_RESULTS)

    def extend(self, other: RunRows) -> None:
        for name in _WITH_RESULTS:
            self.table(name).extend(other.table(name))
        self.parts.extend(other.parts)
        self.remask.update(other.remask)

    def row_count(self) -> int:
        """Rows held here (not counting `parts`). Spelled out: the recorder asks at every
        model request, and a loop over the table names costs several times more."""
        return (
            len(self.runs)
            + len(self.llm_calls)
            + len(self.tool_calls)
            + len(self.context_diffs)
            + len(self.events)
            + len(self.results)
        )

    def as_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {name: self.table(name) for name in _WITH_RESULTS if self.table(name)}

    @classmethod
    def from_dict(cls, data: dict[str, list[dict[str, Any]]]) -> RunRows:
        rows = cls()
        for name in _WITH_RESULTS:
            rows.table(name).extend(data.get(name, ()))
        return rows

    def results_arrow(self) -> pa.Table:
        return _arrow_table(self.results, RESULTS_SCHEMA)

    def arrow(self, name: str) -> pa.Table:
        """One table's rows as an Arrow table with the stored schema."""
        return _arrow_table(self.table(name), ARROW_SCHEMAS[name])


# A batch's Arrow tables live only until DuckDB has copied them. Arrow's default allocator
# (jemalloc) keeps what they freed for itself, so every batch would leave the process ~7 KB a
# recorded step larger; the system allocator gives large blocks back at once.
_BATCH_POOL = pa.system_memory_pool()


def _arrow_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows as columns: one `itemgetter` call a row and one `zip` turn them into columns in C
    (a comprehension per column costs more than converting the columns to Arrow)."""
    if not rows:
        return schema.empty_table()
    columns: list[Any]
    try:
        if len(schema) < 2:  # itemgetter of one name gives the value, not a tuple
            raise KeyError(schema.names)
        columns = list(zip(*map(itemgetter(*schema.names), rows), strict=True))
    except KeyError:  # journals written by an older version lack the columns added since
        columns = [[row.get(name) for row in rows] for name in schema.names]
    arrays = [
        pa.array(column, type=f.type, memory_pool=_BATCH_POOL)
        for column, f in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


class RunTrace(BaseModel):
    """One stored run with everything recorded about it, and the runs it handed off to."""

    run: RunRecord
    llm_calls: list[LlmCallRecord] = []
    tool_calls: list[ToolCallRecord] = []
    context_diffs: list[ContextDiffRecord] = []
    events: list[EventRecord] = []
    children: list[RunRecord] = []

    def timeline(self) -> list[TraceRecord]:
        """Every recorded step of the run, in the order it happened."""
        items: list[Any] = [*self.llm_calls, *self.tool_calls, *self.context_diffs, *self.events]
        return sorted(items, key=lambda item: item.seq)
