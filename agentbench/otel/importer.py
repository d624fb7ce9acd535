"""OTLP/JSON GenAI spans in as stored runs: `agentbench traces import-otel FILE|DIR`.

Spans are grouped into runs: an `invoke_agent` span (GenAI) or an `AGENT` span
(OpenInference) is a run, holding the model and tool calls below it, and the nearest run
above it is its parent (a handoff). Model calls with no agent span above them make one run
per trace — and a plain program that opened no span of its own leaves each call in a trace
of its own, so a call whose messages continue an earlier call's conversation (its input
starts with that call's input and answer) joins that call's run. Each run is then told to
the trace recorder as the typed events the runtime would have emitted, so it is stored,
redacted and read back exactly like a recorded run, and `promote` turns it into a case.

Tool results come from `execute_tool` spans when there are any, else from the tool
messages the next model call sent (a plain program runs its tools without spans). Runs get
ids derived from their trace and span ids: importing a file twice stores nothing twice.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentbench.otel import conventions as c
from agentbench.otel.content import CallContent, SpanContentError, call_content
from agentbench.otel.otlp_json import LogRecord, OtlpFileError, Span, read
from agentbench.runtime.events import (
    EVENT_ADAPTER,
    ErrorInfo,
    ModelRequest,
    ModelResponse,
    RunFinished,
    RunStarted,
    StopReason,
    ToolCallRejected,
    ToolFinished,
    ToolStarted,
)
from agentbench.runtime.models import Usage
from agentbench.runtime.tools import ResultKind, ToolResult
from agentbench.trace.recorder import RunLabels, TraceRecorder
from agentbench.trace.redact import Redactor
from agentbench.trace.store import TraceStore

_CHAT_OPERATIONS = ("chat", "text_completion", "generate_content")


def _operation(span: Span) -> str | None:
    attributes = span.attributes
    operation = attributes.get(c.OPERATION)
    if operation:
        return str(operation)
    kind = attributes.get("openinference.span.kind")
    if kind is not None:
        return {"LLM": "chat", "AGENT": "invoke_agent", "TOOL": "execute_tool"}.get(str(kind))
    # Conventions before gen_ai.operation.name existed: a model call is a span naming the
    # model it asked, or carrying a prompt.
    if c.REQUEST_MODEL in attributes or any(key.startswith("gen_ai.prompt") for key in attributes):
        return "chat"
    return None


@dataclass
class ImportedTool:
    span: Span | None
    call_id: str
    name: str
    arguments: str
    result: ToolResult | None
    effect: str = "unknown"
    rejected: str | None = None
    start_ns: int = 0
    end_ns: int = 0


@dataclass
class ImportedRun:
    """One run being put together from spans."""

    key: str  # trace id : span id of the span that stands for the run
    trace_id: str
    root: Span
    agent: str
    explicit: bool  # an agent span stands for it (else: a trace's loose model calls)
    parent: ImportedRun | None = None
    calls: list[tuple[Span, CallContent]] = field(default_factory=list)
    tools: list[ImportedTool] = field(default_factory=list)
    span_events: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    joined_traces: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return "run_" + hashlib.sha256(f"otel:{self.key}".encode()).hexdigest()[:32]

    def missing(self) -> str | None:
        notes = [content.missing for _, content in self.calls if content.missing]
        return notes[0] if notes else None

    def start_ns(self) -> int:
        starts = [self.root.start_ns] if self.explicit else []
        starts += [span.start_ns for span, _ in self.calls]
        return min(starts) if starts else self.root.start_ns

    def end_ns(self) -> int:
        ends = [self.root.end_ns] if self.explicit else []
        ends += [span.end_ns for span, _ in self.calls] + [t.end_ns for t in self.tools]
        return max(ends) if ends else self.root.end_ns


@dataclass
class ImportSummary:
    files: list[Path]
    stored: list[ImportedRun] = field(default_factory=list)
    skipped: list[ImportedRun] = field(default_factory=list)  # already in the store
    spans: int = 0
    ignored_spans: int = 0  # neither a model, tool nor agent span (HTTP, app spans)


# -- grouping --------------------------------------------------------------------------------------
def _ancestors(span: Span, by_id: dict[str, Span]) -> Iterable[Span]:
    seen = set()
    current = by_id.get(span.parent_span_id or "")
    while current is not None and current.span_id not in seen:
        seen.add(current.span_id)
        yield current
        current = by_id.get(current.parent_span_id or "")


def _service(span: Span) -> str:
    name = str(span.resource.get("service.name") or "")
    return "" if name.startswith("unknown_service") else name


def _trace_runs(spans: list[Span], logs: dict[str, list[LogRecord]]) -> list[ImportedRun]:
    """The runs of one trace, parents before children."""
    by_id = {span.span_id: span for span in spans}
    runs: dict[str, ImportedRun] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        if _operation(span) == "invoke_agent":
            agent = str(
                span.attributes.get(c.AGENT_NAME)
                or span.attributes.get("agent.name")
                or span.name.removeprefix("invoke_agent ").strip()
                or "agent"
            )
            runs[span.span_id] = ImportedRun(
                f"{span.trace_id}:{span.span_id}", span.trace_id, span, agent, explicit=True
            )
    for run in runs.values():
        run.parent = next(
            (runs[a.span_id] for a in _ancestors(run.root, by_id) if a.span_id in runs), None
        )
    loose: ImportedRun | None = None
    for span in sorted(spans, key=lambda s: s.start_ns):
        operation = _operation(span)
        if operation not in (*_CHAT_OPERATIONS, "execute_tool"):
            continue
        owner = next((runs[a.span_id] for a in _ancestors(span, by_id) if a.span_id in runs), None)
        if owner is None:
            if loose is None:
                top = ([span, *_ancestors(span, by_id)])[-1]
                is_call = _operation(top) in (*_CHAT_OPERATIONS, "execute_tool")
                agent = (_service(top) or "imported") if is_call else top.name
                loose = ImportedRun(
                    f"{top.trace_id}:{top.span_id}", top.trace_id, top, agent, False
                )
            owner = loose
        if operation == "execute_tool":
            owner.tools.append(_tool(span))
        else:
            owner.calls.append((span, call_content(span, logs.get(span.span_id, []))))
    for run in runs.values():
        run.span_events = [
            (event.time_ns, event.name.removeprefix(c.EVENT_PREFIX), event.attributes)
            for event in run.root.events
            if event.name.startswith(c.EVENT_PREFIX)
        ]
    found = list(runs.values()) + ([loose] if loose is not None else [])
    return sorted(found, key=lambda r: (_depth(r), r.start_ns()))


def _depth(run: ImportedRun) -> int:
    depth, current = 0, run.parent
    while current is not None:
        depth, current = depth + 1, current.parent
    return depth


def _tool(span: Span) -> ImportedTool:
    attributes = span.attributes
    arguments = attributes.get(c.TOOL_ARGUMENTS, attributes.get("input.value"))
    raw = attributes.get(c.RAW_ARGUMENTS)
    rejected = attributes.get(c.TOOL_REJECTED)
    result: ToolResult | None = None
    if not rejected:
        result = _tool_result(span)
    return ImportedTool(
        span=span,
        call_id=str(
            attributes.get(c.TOOL_CALL_ID) or attributes.get("tool_call.id") or span.span_id
        ),
        name=str(
            attributes.get(c.TOOL_NAME)
            or attributes.get("tool.name")
            or span.name.removeprefix("execute_tool ").strip()
        ),
        arguments=raw
        if isinstance(raw, str)
        else (arguments if isinstance(arguments, str) else json.dumps(arguments or {})),
        result=result,
        effect=str(attributes.get(c.TOOL_EFFECT, "unknown")),
        rejected=str(rejected) if rejected else None,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
    )


def _tool_result(span: Span) -> ToolResult | None:
    attributes = span.attributes
    kind = attributes.get(c.RESULT_KIND)
    if kind is None:
        kind = "system_error" if span.status_code == 2 else "ok"
    if c.TOOL_RESULT in attributes:
        data = _loads(attributes[c.TOOL_RESULT])
    elif "output.value" in attributes:
        data = _loads(attributes["output.value"])
    elif kind == "ok":
        return None  # a tool span without its result: the next request may carry it
    else:
        data = None
    error = attributes.get(c.TOOL_ERROR) or (span.status_message if kind != "ok" else None)
    return ToolResult(
        kind=ResultKind(kind),
        data=data,
        error=error or (None if kind == "ok" else "failed"),
        duration_ms=(span.end_ns - span.start_ns) / 1e6,
        truncated=bool(attributes.get(c.TOOL_TRUNCATED, False)),
        stop=bool(attributes.get(c.TOOL_STOPS, False)),
    )


def _loads(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _message_key(message: dict[str, Any]) -> str:
    """What makes two messages the same turn, whether read from an input or an output."""
    calls = [
        (
            call.get("id"),
            (call.get("function") or {}).get("name"),
            (call.get("function") or {}).get("arguments"),
        )
        for call in message.get("tool_calls") or []
    ]
    return json.dumps(
        [message.get("role"), message.get("content") or "", calls, message.get("tool_call_id")],
        sort_keys=True,
        default=str,
    )


def _conversation_after(run: ImportedRun) -> list[str] | None:
    """The keys of the messages a call continuing this run's conversation would start with."""
    if not run.calls:
        return None
    _, last = run.calls[-1]
    if last.missing:
        return None
    messages = [*last.request.get("messages", []), last.response.as_message()]
    return [_message_key(m) for m in messages]


def _join_continuations(runs: list[ImportedRun]) -> list[ImportedRun]:
    """Loose single-trace runs whose first call continues an earlier run's conversation are
    folded into it (each earlier run takes at most one continuation: the next turn)."""
    kept: list[ImportedRun] = []
    open_tails: dict[str, ImportedRun] = {}  # run key → run, while its tail is unclaimed
    for run in sorted(runs, key=lambda r: r.start_ns()):
        if run.explicit or not run.calls or run.calls[0][1].missing:
            kept.append(run)
            continue
        first = [_message_key(m) for m in run.calls[0][1].request.get("messages", [])]
        target = None
        for candidate in reversed(list(open_tails.values())):
            tail = _conversation_after(candidate)
            if tail and len(first) > len(tail) and first[: len(tail)] == tail:
                target = candidate
                break
        if target is None:
            kept.append(run)
            open_tails[run.key] = run
            continue
        target.calls.extend(run.calls)
        target.tools.extend(run.tools)
        target.joined_traces.append(run.trace_id)
        open_tails.pop(target.key)
        open_tails[target.key] = target  # its tail moved on
    return kept


def group(spans: list[Span], logs: list[LogRecord]) -> tuple[list[ImportedRun], int]:
    """Runs found in the spans, and how many spans were neither model, tool nor agent spans."""
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    logs_by_span: dict[str, list[LogRecord]] = defaultdict(list)
    for log in logs:
        if log.span_id:
            logs_by_span[log.span_id].append(log)
    runs: list[ImportedRun] = []
    for trace_spans in by_trace.values():
        runs.extend(_trace_runs(trace_spans, logs_by_span))
    used = sum(
        1
        for span in spans
        if _operation(span) in (*_CHAT_OPERATIONS, "execute_tool", "invoke_agent")
    )
    return _join_continuations(runs), len(spans) - used


# -- events ----------------------------------------------------------------------------------------
def _ts(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1000 / 1e6, UTC).replace(
        microsecond=(ns // 1000) % 1_000_000
    )


def _input_of(run: ImportedRun) -> Any:
    attributes = run.root.attributes
    if c.RUN_INPUT in attributes:
        return _loads(attributes[c.RUN_INPUT])
    for _, content in run.calls:
        users = [m for m in content.request.get("messages", []) if m.get("role") == "user"]
        if users:
            text = users[0].get("content")
            return text if isinstance(text, str) else [users[0]]
    return ""


def _inferred_tools(run: ImportedRun) -> list[ImportedTool]:
    """Tool calls of a run without tool spans: each answer's calls, with the result the next
    request sent back for it (a tool message with its id)."""
    found: list[ImportedTool] = []
    for index, (span, content) in enumerate(run.calls):
        results: dict[str, str] = {}
        later = run.calls[index + 1] if index + 1 < len(run.calls) else None
        if later is not None:
            for message in later[1].request.get("messages", []):
                if message.get("role") == "tool" and message.get("tool_call_id"):
                    results[message["tool_call_id"]] = message.get("content") or ""
        for call in content.response.tool_calls:
            if call.id not in results:
                continue
            at = later[0].start_ns if later is not None else span.end_ns
            found.append(
                ImportedTool(
                    span=None,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    result=ToolResult.ok(_loads(results[call.id])),
                    start_ns=span.end_ns,
                    end_ns=max(span.end_ns, at - 1000),
                )
            )
    return found


def _stop_reason(run: ImportedRun) -> tuple[StopReason, ErrorInfo | None]:
    attributes = run.root.attributes
    stated = attributes.get(c.STOP_REASON)
    error = None
    if c.RUN_ERROR in attributes:
        error = ErrorInfo.model_validate(_loads(attributes[c.RUN_ERROR]))
    if stated:
        return StopReason(str(stated)), error
    failed = [s for s, _ in run.calls if s.status_code == 2]
    if run.explicit and run.root.status_code == 2:
        failed.insert(0, run.root)
    if failed:
        span = failed[0]
        return StopReason.ERROR, ErrorInfo(
            type=str(span.attributes.get(c.ERROR_TYPE) or "error"),
            message=span.status_message or f"span {span.name!r} failed",
        )
    return StopReason.COMPLETED, None


def run_events(run: ImportedRun, run_ids: dict[str, str]) -> list[Any]:
    """The run told as the runtime's typed events, in order, numbered from 0."""
    base = {"run_id": run.run_id, "agent": run.agent}
    attributes = run.root.attributes
    calls = run.calls
    model = str(
        attributes.get(c.REQUEST_MODEL) or (calls[0][1].request.get("model") if calls else "") or ""
    )
    timed: list[tuple[int, int, dict[str, Any]]] = []  # (ns, order, fields of an event)
    context = _loads(attributes.get(c.RUN_CONTEXT)) or {}
    parent = run_ids.get(run.parent.key) if run.parent is not None else None
    order = 0

    def add(ns: int, event_type: Any, **fields: Any) -> None:
        nonlocal order
        timed.append((ns, order, {"type": event_type, "ts": _ts(ns), **fields}))
        order += 1

    add(
        run.start_ns(),
        RunStarted,
        input=_input_of(run),
        model=model,
        parent_run_id=parent,
        context=context,
    )
    tools = run.tools or _inferred_tools(run)
    for step, (span, content) in enumerate(calls, 1):
        purpose = "memory" if span.attributes.get(c.PURPOSE) == "memory" else "agent"
        step = int(span.attributes.get(c.STEP, step))
        add(span.start_ns, ModelRequest, step=step, request=content.request, purpose=purpose)
        add(span.end_ns, ModelResponse, step=step, response=content.response, purpose=purpose)
    steps = [
        (span.start_ns, int(span.attributes.get(c.STEP, i))) for i, (span, _) in enumerate(calls, 1)
    ]
    for tool in tools:
        step = int(tool.span.attributes.get(c.STEP, 0)) if tool.span is not None else 0
        if not step:
            step = max((s for ns, s in steps if ns <= tool.start_ns), default=1)
        common = {"step": step, "call_id": tool.call_id, "tool": tool.name}
        if tool.rejected:
            reason = (
                tool.rejected
                if tool.rejected in ("unknown_tool", "invalid_json", "invalid_arguments")
                else "invalid_arguments"
            )
            message = str(tool.span.attributes.get(c.TOOL_ERROR, "")) if tool.span else ""
            add(
                tool.start_ns,
                ToolCallRejected,
                raw_arguments=tool.arguments,
                reason=reason,
                message=message,
                **common,
            )
            continue
        if tool.result is None:
            continue  # a tool span with neither result nor a later tool message
        arguments = _loads(tool.arguments)
        arguments = arguments if isinstance(arguments, dict) else {"arguments": tool.arguments}
        add(tool.start_ns, ToolStarted, arguments=arguments, **common)
        add(
            tool.end_ns,
            ToolFinished,
            arguments=arguments,
            result=tool.result,
            effect=tool.effect,
            **common,
        )
    for ns, kind, fields in run.span_events:
        decoded = {k: _loads(v) if k in ("old", "new", "detail") else v for k, v in fields.items()}
        if kind == "handoff" and decoded.get("child_run_id"):
            decoded["child_run_id"] = run_ids.get(decoded["child_run_id"], decoded["child_run_id"])
        add(ns, kind, **decoded)
    stop, error = _stop_reason(run)
    output = (
        _loads(attributes[c.RUN_OUTPUT])
        if c.RUN_OUTPUT in attributes
        else (calls[-1][1].response.text if calls else None)
    )
    usage = Usage()
    for _, content in calls:
        usage = usage + content.response.usage
    iterations = int(attributes.get(c.ITERATIONS, len(calls)) or 0)
    end = run.end_ns()
    timed.sort(key=lambda item: item[:2])
    events = []
    for seq, (_, _, fields) in enumerate(timed):
        event_type = fields.pop("type")
        if isinstance(event_type, str):  # an agentbench span event: any kind of the union
            fields.pop("seq", None)
            events.append(
                EVENT_ADAPTER.validate_python({**base, **fields, "seq": seq, "kind": event_type})
            )
        else:
            events.append(event_type(**base, seq=seq, **fields))
    events.append(
        RunFinished(
            **base,
            seq=len(events),
            ts=_ts(end),
            stop_reason=stop,
            output=output,
            error=error,
            usage=usage,
            iterations=iterations,
            duration_ms=(end - run.start_ns()) / 1e6,
        )
    )
    return events


def _child_ids(run: ImportedRun) -> dict[str, str]:
    """agentbench's own spans name the original run ids; map them to the imported ones."""
    original = run.root.attributes.get(c.RUN_ID)
    return {str(original): run.run_id} if original else {}


# -- storing ---------------------------------------------------------------------------------------
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
        run_ids.update(_child_ids(run))
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
