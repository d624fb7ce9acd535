"""OTLP GenAI spans in as stored runs: `agentbench traces import-otel FILE|DIR`.

The files are read within bounds (`otlp_files`: size, encoding, JSON lines or protobuf), the
spans checked as trees (`span_tree`: one span per id, no parent cycles) and grouped into runs
(`grouping`), each run told as events (`run_events`) to a trace recorder on the store,
labelled with where it came from and — when its spans carried no message content — why it
cannot be replayed. All or nothing: every run's events are made before the first is recorded,
so a file that is wrong anywhere is refused (`OtlpFileError`, naming where) with the store
unchanged. A run already in the store (the same trace and span) is skipped: importing a file
twice stores nothing twice.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench.errors import one_line
from agentbench.otel import conventions as c
from agentbench.otel.content import SpanContentError
from agentbench.otel.grouping import ImportedRun, group
from agentbench.otel.otlp_files import max_bytes_of, read
from agentbench.otel.otlp_json import OtlpFileError
from agentbench.otel.run_events import child_ids, run_events
from agentbench.otel.span_tree import checked
from agentbench.trace.recorder import RunLabels, TraceRecorder
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.schema import RunRows
from agentbench.trace.store import TraceStore


@dataclass
class ImportSummary:
    files: list[Path]
    stored: list[ImportedRun] = field(default_factory=list)
    skipped: list[ImportedRun] = field(default_factory=list)  # already in the store
    spans: int = 0
    ignored_spans: int = 0  # neither a model, tool nor agent span (HTTP, app spans)


def instrumentation_of(run: ImportedRun) -> str:
    span = run.calls[0][0] if run.calls else run.root
    scope = f"{span.scope} {span.scope_version}".strip()
    return scope or "unknown instrumentation"


def _origin(run: ImportedRun, source: str) -> str:
    origin = {
        "format": "otlp-json",
        "file": source,
        "trace_id": run.trace_id,
        "span_id": run.root.span_id,
        "instrumentation": instrumentation_of(run),
        "content": sorted({content.form for _, content in run.calls if content.form}),
    }
    if run.joined_traces:
        origin["joined_traces"] = run.joined_traces
    recorded = run.recorded_fields()
    if recorded is not None:  # what a replay can compare (`replay.drift.TraceSource`)
        origin["recorded_fields"] = recorded
    return json.dumps(origin, ensure_ascii=False)


def _stored(store: TraceStore, run_ids: list[str]) -> set[str]:
    """Which of these runs the store holds already (none, for a store not made yet)."""
    if not store.path.exists():
        return set()
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [run_ids]
        ).fetchall()
    return {row[0] for row in rows}


def import_files(
    store: TraceStore, paths: Iterable[Path], *, max_bytes: int | None = None
) -> ImportSummary:
    """Read every span of the files and store the runs they hold (those not stored yet); the
    files together may hold `max_bytes` (default `otlp_files.DEFAULT_MAX_MB`)."""
    with _without_cycle_collection():
        return _import(store, list(paths), max_bytes_of(None) if max_bytes is None else max_bytes)


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """An import makes millions of objects that live to its end and hold no cycles: Python's
    cycle collector would walk them all again and again (a quarter of the import's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _import(store: TraceStore, paths: list[Path], max_bytes: int) -> ImportSummary:
    spans, logs = read(paths, max_bytes)
    spans = checked(spans)
    summary = ImportSummary(files=paths, spans=len(spans))
    try:
        runs, summary.ignored_spans = group(spans, logs)
    except SpanContentError as exc:
        raise OtlpFileError(str(exc)) from None
    if not runs:
        return summary
    known = _stored(store, [run.run_id for run in runs])
    run_ids: dict[str, str] = {run.key: run.run_id for run in runs}
    for run in runs:
        run_ids.update(child_ids(run))
    recorded = _Recorded()
    for run in runs:
        if run.run_id in known:
            summary.skipped.append(run)
            continue
        recorder = _recorder(recorded, store, run)
        for event in _events(run, run_ids):
            recorder(event)
        summary.stored.append(run)
    recorded.store_in(store)  # only once every run was recorded: nothing half-imported
    store.flush()
    return summary


class _Recorded:
    """The rows recorders made of the runs, kept until every run is made (the rows are the
    runs' stored form, far smaller than their spans' events), then stored in that order."""

    def __init__(self) -> None:
        self.rows: list[tuple[dict[str, Any], RunRows]] = []
        self._started: dict[str, dict[str, Any]] = {}

    def run_started(self, row: dict[str, Any]) -> None:
        self._started[row["run_id"]] = row

    def run_finished(self, rows: RunRows) -> None:
        for run in rows.runs:
            self.rows.append((self._started.pop(run["run_id"]), rows))

    def store_in(self, store: TraceStore) -> None:
        for started, rows in self.rows:
            store.run_started(started)
            store.run_finished(rows)


def _events(run: ImportedRun, run_ids: dict[str, str]) -> list[Any]:
    """The run as the runtime's events; OtlpFileError naming its span when it cannot be."""
    try:
        return run_events(run, run_ids)
    except SpanContentError as exc:
        raise OtlpFileError(str(exc)) from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise OtlpFileError(f"{run.root.where}: {one_line(exc, 200)}") from None


def _recorder(sink: _Recorded, store: TraceStore, run: ImportedRun) -> TraceRecorder:
    labels = RunLabels(
        conversation_id=str(run.root.attributes.get(c.CONVERSATION_ID) or "") or None,
        origin=_origin(run, run.root.file),
        not_replayable=run.missing(),
    )
    service_version = run.root.resource.get("service.version")
    return TraceRecorder(
        sink,
        redactor=Redactor(store.redaction),
        labels=labels,
        code_version=lambda: str(service_version) if service_version else None,
    )
