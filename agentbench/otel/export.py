"""Stored runs out as OTLP/JSON spans: `agentbench traces export-otel`.

Each conversation (a root run and the runs it handed off to) is rebuilt into its typed
events (`events_of`, the same rebuild replay uses), fed through `SpanWriter` on a private
tracer provider, and written as one OTLP/JSON line. Trace and span ids are derived from the
run ids and event numbers, so exporting the same runs twice writes the same ids, and a
collector or an importer sees the same trace, not a copy. Content is written only with
`content=True` (the conventions make content opt-in), and passes the store's redactor on the
way out as well as on the way in: rules added since a run was recorded apply to its export.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from agentbench._version import __version__
from agentbench.otel.otlp_json import span_lines
from agentbench.otel.spans import SpanWriter
from agentbench.replay.convert import conversations
from agentbench.replay.stored_events import events_of
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.store import TraceStore


def _number(text: str, size: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big")
    return value or 1  # an all-zero id is invalid


class _PlannedIds(IdGenerator):
    """Hands out the ids the export planned for the next span (the SDK asks for them)."""

    def __init__(self) -> None:
        self.trace_id = 1
        self.span_id = 1

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


@dataclass
class ExportSummary:
    conversations: int = 0
    runs: int = 0
    spans: int = 0


class SpanExport:
    """Writes conversations of a store as OTLP/JSON lines to `out`."""

    def __init__(self, store: TraceStore, out: IO[str], *, content: bool) -> None:
        self.store = store
        self.out = out
        self.content = content
        self.summary = ExportSummary()
        self._ids = _PlannedIds()
        self._exporter = InMemorySpanExporter()
        # A resource of its own, not the SDK's default: that one carries a random
        # service.instance.id, and an export of the same runs must be the same file.
        resource = Resource({"service.name": "agentbench", "service.version": __version__})
        provider = TracerProvider(id_generator=self._ids, resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(self._exporter))
        self._tracer = provider.get_tracer("agentbench", __version__)
        self._redactor = Redactor(store.redaction)

    def roots(self, run_ids: Iterable[str]) -> list[str]:
        """The roots of the conversations the runs belong to, each once, in the order given."""
        seen: dict[str, None] = {}
        with self.store.reading() as conn:
            for run_id in run_ids:
                current = run_id
                while True:
                    row = conn.execute(
                        "SELECT run_id, parent_run_id FROM runs WHERE run_id = ?", [current]
                    ).fetchone()
                    if row is None or row[1] is None:
                        break
                    current = row[1]
                seen.setdefault(current if row is not None else run_id, None)
        return list(seen)

    def write(self, root_ids: list[str]) -> ExportSummary:
        for start in range(0, len(root_ids), 64):  # a bounded number of trees in memory
            batch = root_ids[start : start + 64]
            for root, traces in conversations(self.store, batch).items():
                self._conversation(root, traces)
        return self.summary

    def _conversation(self, root: str, traces: list[Any]) -> None:
        conversation_id = traces[0].run.conversation_id or traces[0].run.run_id
        events = []
        for order, trace in enumerate(traces):
            events.extend((event.ts, order, event.seq, event) for event in events_of(trace))
        events.sort(key=lambda item: item[:3])
        self._ids.trace_id = _number(f"trace:{root}", 16)

        def plan(_name: str, event: Any) -> None:
            self._ids.span_id = _number(f"span:{event.run_id}:{event.seq}", 8)

        writer = SpanWriter(
            self._tracer,
            content=self.content,
            scrub=self._redactor.value,
            conversation_of=lambda _event: conversation_id,
            before_span=plan,
        )
        for *_, event in events:
            writer(event)
        writer.close()
        spans = self._exporter.get_finished_spans()
        self._exporter.clear()
        self.out.write(span_lines(spans))
        self.summary.conversations += 1
        self.summary.runs += len(traces)
        self.summary.spans += len(spans)


def export_runs(
    store: TraceStore, run_ids: Iterable[str], out_path: Path, *, content: bool
) -> ExportSummary:
    """Write the conversations of `run_ids` to `out_path` (replaced) as OTLP/JSON lines."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        export = SpanExport(store, out, content=content)
        summary = export.write(export.roots(run_ids))
    partial.replace(out_path)  # a failed export never leaves half a file under the name asked
    return summary
