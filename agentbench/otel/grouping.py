"""OTLP/JSON spans grouped into the runs they record, whichever program made them.

An `invoke_agent` span (GenAI) or an `AGENT` span (OpenInference) is a run, holding the model
and tool calls below it, and the nearest run above it is its parent (a handoff). Model calls
with no agent span above them make one run per trace — and a plain program that opened no
span of its own leaves each call in a trace of its own, so a call whose messages continue an
earlier call's conversation (its input starts with that call's input and answer) joins that
call's run. Runs get ids derived from their trace and span ids, so the same spans always
make the same run.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentbench.otel import bounded_json
from agentbench.otel import conventions as c
from agentbench.otel.content import CallContent, call_content, read_from
from agentbench.otel.otlp_json import LogRecord, Span
from agentbench.runtime.tools import ResultKind, ToolResult

_CHAT_OPERATIONS = ("chat", "text_completion", "generate_content")
# A model call's content as JSON text, which `call_content` parses into its request and
# response: nothing reads the text again.
_CONTENT_TEXTS = (
    c.INPUT_MESSAGES,
    c.OUTPUT_MESSAGES,
    c.SYSTEM_INSTRUCTIONS,
    c.TOOL_DEFINITIONS,
    "input.value",
    "output.value",
)


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

    def recorded_fields(self) -> list[str] | None:
        """The request fields the run's spans recorded (None: whole requests). A setting one
        call's span names is one the instrumentation records: its absence elsewhere means
        that call did not send it."""
        partial = [c.recorded_fields for _, c in self.calls if c.recorded_fields is not None]
        return sorted(frozenset().union(*partial)) if partial else None

    def start_ns(self) -> int:
        starts = [self.root.start_ns] if self.explicit else []
        starts += [span.start_ns for span, _ in self.calls]
        return min(starts) if starts else self.root.start_ns

    def end_ns(self) -> int:
        ends = [self.root.end_ns] if self.explicit else []
        ends += [span.end_ns for span, _ in self.calls] + [t.end_ns for t in self.tools]
        return max(ends) if ends else self.root.end_ns


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
            for name in _CONTENT_TEXTS:  # read now, and the bulk of a file: not kept twice
                span.attributes.pop(name, None)
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
    """The tool call a span records; SpanContentError naming the span when it cannot be read."""
    with read_from(span, "its tool call"):
        return _read_tool(span)


def _read_tool(span: Span) -> ImportedTool:
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
    if kind is None and c.RUN_ID in attributes:
        return None  # agentbench writes every result's kind: this call never finished
    if kind is None:
        kind = "system_error" if span.status_code == 2 else "ok"
    if c.TOOL_RESULT in attributes:
        data = loads(attributes[c.TOOL_RESULT])
    elif "output.value" in attributes:
        data = loads(attributes["output.value"])
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


def loads(value: Any) -> Any:
    """An attribute's JSON text as its value; the text itself when it is not JSON (a tool's
    plain-text result), or is JSON the store could not hold as a value (an integer beyond
    64 bits, nesting deeper than MAX_DEPTH): kept as written, nothing misread or lost."""
    if not isinstance(value, str):
        return value
    try:
        return bounded_json.loads(value)
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


def _prefix_hashes(keys: list[str]) -> list[int]:
    """`out[i]` is a hash of `keys[: i + 1]`: every prefix of a conversation, in one pass."""
    hashes, running = [], 0
    for key in keys:
        running = hash((running, key))
        hashes.append(running)
    return hashes


class _OpenTails:
    """Runs whose conversation a later call may continue, indexed by the messages such a call
    would start with (their count and hash), each index entry in the order its runs were
    opened or last continued: finding the run a call continues costs a lookup per message of
    the call, however many runs are open (a scan of every open run made a plain program's
    thousands of single-call traces take hours)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], dict[str, ImportedRun]] = defaultdict(dict)
        self._tails: dict[str, tuple[tuple[int, int], list[str]]] = {}
        self._stamps: dict[str, int] = {}  # when each run was last opened
        self._clock = 0

    def open(self, run: ImportedRun) -> None:
        """Index `run` by its conversation so far (again, after it took a continuation)."""
        old = self._tails.pop(run.key, None)
        if old is not None:
            self._entries[old[0]].pop(run.key, None)
        tail = _conversation_after(run)
        if tail:
            entry = (len(tail), _prefix_hashes(tail)[-1])
            self._entries[entry][run.key] = run  # last in its entry: the latest opened
            self._tails[run.key] = (entry, tail)
            self._clock += 1
            self._stamps[run.key] = self._clock

    def continued_by(self, first: list[str]) -> ImportedRun | None:
        """The latest opened run whose whole conversation `first` starts with and extends."""
        best: ImportedRun | None = None
        for length, hashed in enumerate(_prefix_hashes(first[:-1]), 1):
            runs = self._entries.get((length, hashed))
            if not runs:
                continue
            for key in reversed(runs):  # nearly always the first: the hashes matched
                if self._tails[key][1] == first[:length]:
                    if best is None or self._stamps[key] > self._stamps[best.key]:
                        best = runs[key]
                    break
        return best


def _join_continuations(runs: list[ImportedRun]) -> list[ImportedRun]:
    """Loose single-trace runs whose first call continues an earlier run's conversation are
    folded into it (each earlier run takes at most one continuation: the next turn)."""
    kept: list[ImportedRun] = []
    open_tails = _OpenTails()
    for run in sorted(runs, key=lambda r: r.start_ns()):
        if run.explicit or not run.calls or run.calls[0][1].missing:
            kept.append(run)
            continue
        first = [_message_key(m) for m in run.calls[0][1].request.get("messages", [])]
        target = open_tails.continued_by(first)
        if target is None:
            kept.append(run)
            open_tails.open(run)
            continue
        target.calls.extend(run.calls)
        target.tools.extend(run.tools)
        target.joined_traces.append(run.trace_id)
        open_tails.open(target)  # its tail moved on
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
