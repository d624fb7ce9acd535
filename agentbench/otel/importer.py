"""OTLP/JSON GenAI spans in as stored runs: `agentbench traces import-otel FILE|DIR`.

The files are read (`otlp_json`), their spans grouped into runs (`grouping`), each run told
as events (`run_events`) to a trace recorder on the store, labelled with where it came from
and — when its spans carried no message content — why it cannot be replayed. A run already
in the store (the same trace and span) is skipped: importing a file twice stores nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentbench.otel import conventions as c
from agentbench.otel.content import SpanContentError
from agentbench.otel.grouping import ImportedRun, group
from agentbench.otel.otlp_json import OtlpFileError, read
from agentbench.otel.run_events import child_ids, run_events
from agentbench.trace.recorder import RunLabels, TraceRecorder
from agentbench.trace.redact import Redactor
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


def import_files(store: TraceStore, paths: Iterable[Path]) -> ImportSummary:
    """Read every span of the files and store the runs they hold (those not stored yet)."""
    paths = list(paths)
    spans, logs = read(paths)
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
    for run in runs:
        if run.run_id in known:
            summary.skipped.append(run)
            continue
        labels = RunLabels(
            conversation_id=str(run.root.attributes.get(c.CONVERSATION_ID) or "") or None,
            origin=_origin(run, run.root.file),
            not_replayable=run.missing(),
        )
        service_version = run.root.resource.get("service.version")
        recorder = TraceRecorder(
            store,
            redactor=Redactor(store.redaction),
            labels=labels,
            code_version=lambda v=service_version: str(v) if v else None,
        )
        try:
            events = run_events(run, run_ids)
        except (ValueError, SpanContentError) as exc:
            raise OtlpFileError(f"{run.root.where}: {str(exc).splitlines()[0]}") from None
        for event in events:
            recorder(event)
        summary.stored.append(run)
    store.flush()
    return summary
