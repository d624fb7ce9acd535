"""`TraceRecorder`: a runner hook that turns events into trace rows.

It keeps a little state per run (the previous request, calls waiting for their result), so
one recorder can follow any number of interleaved runs — a conversation's handoff children
arrive through the same hooks. Rows are redacted as they are built, so nothing unredacted
ever leaves it. When a run starts its sink is told (a cheap, durable marker, so a crash
shows the run as `incomplete`); when it finishes the sink gets all of the run's rows at once.
A long run's finished rows go to a sink that takes parts (`run_part`: the store journals them)
every `SPILL_ROWS` rows, so the recorder holds a part of a run, not all of it.

Mapping: run_started/run_finished → `runs`; model_request + model_response → `llm_calls`;
tool_started + tool_finished, and tool_call_rejected → `tool_calls`; context_changed →
`context_diffs`; text deltas of one model call are coalesced into one `text_delta` row of
`events`; every other kind (memory_decision, handoff, guard_triggered, and kinds added
later) → `events`, with the event's own fields as a JSON payload.

Redaction sees whole values before anything is cut here (request diffs keep a prefix and a
suffix of redacted text); what the runtime cut before us is handled by the redactor's rule for
fragments at a truncation marker, and a streamed answer's chunks are redacted joined. A value
the redactor learns is a secret part way through (a tool argument named `password` that the
input already held) is masked in the run's earlier rows when it ends (see `redaction.remask`);
so the start marker, written before anything is learned, holds neither input nor context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from agentbench.runtime.completions import STREAM_OBJECT
from agentbench.trace import _json, repairs
from agentbench.trace.code_version import code_version as current_code_version
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.remask import Remasker
from agentbench.trace.redaction.stream import redact_chunks
from agentbench.trace.request_diff import RequestChain, encode_request
from agentbench.trace.schema import CHILD_TABLES, TABLES, RunRows, RunStatus, status_of

log = logging.getLogger("agentbench.trace")

# Fields every event has; the rest of an unknown event is its payload.
_BASE_FIELDS = {"run_id", "seq", "ts", "agent", "kind", "step"}
# Rows a run holds before its finished ones go to the sink as a part (about 250 steps).
SPILL_ROWS = 512


class RunSink(Protocol):
    """Where a recorder delivers runs (a `TraceStore`, or a list in tests). A sink may also
    take a long run's finished rows before it ends: `run_part(rows)`."""

    def run_started(self, row: dict[str, Any]) -> None: ...

    def run_finished(self, rows: RunRows) -> None: ...


@dataclass(frozen=True)
class RunLabels:
    """What an evaluation knows about a run that the runtime does not."""

    eval_id: str | None = None
    case_id: str | None = None
    trial: int | None = None
    replay_of: str | None = None
    # A served request (`agentbench serve`): its HTTP request id, the client's conversation
    # id, and the agent reference that served it (what `agentbench replay RUN_ID` loads).
    request_id: str | None = None
    conversation_id: str | None = None
    agent_ref: str | None = None
    # A run imported from OpenTelemetry spans: where it came from (JSON), and why it cannot be
    # replayed when its spans carried no message content.
    origin: str | None = None
    not_replayable: str | None = None
    # A served request's caller: the name of the key it came with (never the key).
    caller: str | None = None


@dataclass
class _RunTrace:
    run: dict[str, Any]
    rows: RunRows = field(default_factory=RunRows)
    chains: dict[str, RequestChain] = field(default_factory=dict)
    waiting_llm: dict[str, dict[str, Any]] = field(default_factory=dict)  # by purpose
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # by call id
    text: dict[str, Any] | None = None  # deltas of the current model call, coalesced
    # Rows already handed to the sink as parts, by table.
    spilled: dict[str, int] = field(default_factory=dict)


class TraceRecorder:
    """Call it with every event (it is a hook); it hands finished runs to its sink."""

    def __init__(
        self,
        sink: RunSink,
        *,
        redactor: Redactor | None = None,
        labels: RunLabels | None = None,
        code_version: Callable[[], str | None] = current_code_version,
    ) -> None:
        self.sink = sink
        self.redactor = redactor or Redactor()
        self.labels = labels or RunLabels()
        self._code_version = code_version
        self._run_part: Callable[[RunRows], None] | None = getattr(sink, "run_part", None)
        self._runs: dict[str, _RunTrace] = {}
        self._handlers: dict[str, Callable[[_RunTrace, Any], None]] = {
            "model_request": self._model_request,
            "model_response": self._model_response,
            "text_delta": self._text_delta,
            "tool_started": self._tool_started,
            "tool_finished": self._tool_finished,
            "tool_call_rejected": self._tool_call_rejected,
            "context_changed": self._context_changed,
        }

    def __call__(self, event: Any) -> None:
        mark = _json.repair_mark()  # text the store cannot hold is repaired, and noted
        kind = event.kind
        if kind == "run_started":
            self._run_started(event)
            self._note_repairs(self._runs[event.run_id], event, mark)
            return
        trace = self._runs.get(event.run_id) or self._adopt(event)
        if kind != "text_delta":
            self._flush_text(trace)
        if kind == "run_finished":
            self._run_finished(trace, event, mark)
            return
        self._handlers.get(kind, self._other)(trace, event)
        self._note_repairs(trace, event, mark)

    def _note_repairs(self, trace: _RunTrace, event: Any, mark: tuple[int, int]) -> None:
        if _json.repair_mark() != mark:
            made = _json.Repairs.since(mark)
            trace.rows.events.append(repairs.note(trace.run["run_id"], event, made))

    def _well_formed(self, trace: _RunTrace, rows: RunRows, tables: tuple[str, ...]) -> None:
        """Plain text columns (not JSON) made well-formed before rows leave; noted."""
        for table in tables:
            for row, column in repairs.well_formed_rows(table, rows.table(table)):
                trace.rows.events.append(repairs.column_note(row, column, trace.run["started_at"]))

    # -- runs ------------------------------------------------------------------------------
    def _run_started(self, event: Any) -> None:
        run = self._run_row(event, event.ts)
        run.update(
            parent_run_id=event.parent_run_id,
            model=event.model,
            input=self._json(event.input),
            context=self._json(event.context) if event.context else None,
        )
        trace = self._runs[event.run_id] = _RunTrace(run)
        self._well_formed(trace, RunRows(runs=[run]), ("runs",))
        self.sink.run_started({**run, "input": None, "context": None})

    def _adopt(self, event: Any) -> _RunTrace:
        """A run whose start we did not see (attached mid-run): record what we can."""
        trace = _RunTrace(self._run_row(event, event.ts))
        self._runs[event.run_id] = trace
        return trace

    def _run_row(self, event: Any, started: datetime) -> dict[str, Any]:
        return {
            "run_id": event.run_id,
            "parent_run_id": None,
            "eval_id": self.labels.eval_id,
            "case_id": self.labels.case_id,
            "trial": self.labels.trial,
            "replay_of": self.labels.replay_of,
            "request_id": self.labels.request_id,
            "conversation_id": self.labels.conversation_id,
            "agent_ref": self.labels.agent_ref,
            "origin": self.labels.origin,
            "not_replayable": self.labels.not_replayable,
            "caller": self.labels.caller,
            "agent": event.agent,
            "model": None,
            "input": None,
            "output": None,
            "status": RunStatus.INCOMPLETE.value,
            "stop_reason": None,
            "error": None,
            "started_at": started,
            "finished_at": None,
            "duration_ms": None,
            "iterations": None,
            "llm_calls": None,
            "tool_calls": None,
            "input_tokens": None,
            "output_tokens": None,
            "cost_usd": None,
            "code_version": self._code_version(),
            "context": None,
            "finished_seq": None,
            "usage_estimated": None,
        }

    def _run_finished(self, trace: _RunTrace, event: Any, mark: tuple[int, int]) -> None:
        del self._runs[event.run_id]
        stop = str(event.stop_reason)
        usage = event.usage
        trace.run.update(
            status=status_of(stop).value,
            stop_reason=stop,
            output=None if event.output is None else self._json(event.output),
            error=None if event.error is None else self._json(event.error),
            finished_at=event.ts,
            finished_seq=event.seq,
            duration_ms=event.duration_ms,
            iterations=event.iterations,
            llm_calls=len(trace.rows.llm_calls) + trace.spilled.get("llm_calls", 0),
            tool_calls=len(trace.rows.tool_calls) + trace.spilled.get("tool_calls", 0),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            usage_estimated=usage.estimated or None,
        )
        trace.rows.runs.append(trace.run)
        self._well_formed(trace, trace.rows, TABLES)
        self._note_repairs(trace, event, mark)
        trace.rows.tool_calls.sort(key=lambda row: row["seq"])
        if self.redactor.learned:
            self._remask(trace)
        self.sink.run_finished(trace.rows)

    def _remask(self, trace: _RunTrace) -> None:
        """Mask what the run learned is secret in the rows made before it knew (see
        `remask`): here, or — when some already went to the sink as parts — as it is stored."""
        if trace.spilled and self._run_part is not None:
            trace.rows.remask[trace.run["run_id"]] = self.redactor.portable_rules()
        else:
            Remasker.of(self.redactor).rows(trace.rows)

    def _spill(self, trace: _RunTrace) -> None:
        """Hand the run's finished rows to the sink as a part; keep those still waiting for
        their response or result (they are updated when it comes)."""
        waiting = {id(row) for row in (*trace.waiting_llm.values(), *trace.tools.values())}
        part = RunRows()
        for name in CHILD_TABLES:
            rows = trace.rows.table(name)
            part.table(name).extend(row for row in rows if id(row) not in waiting)
            rows[:] = [row for row in rows if id(row) in waiting]
            trace.spilled[name] = trace.spilled.get(name, 0) + len(part.table(name))
        part.tool_calls.sort(key=lambda row: row["seq"])
        self._well_formed(trace, part, CHILD_TABLES)
        if self._run_part is not None and not part.is_empty():
            self._run_part(part)

    # -- model calls ---------------------------------------------------------------------
    def _model_request(self, trace: _RunTrace, event: Any) -> None:
        if self._run_part is not None and trace.rows.row_count() >= SPILL_ROWS:
            self._spill(trace)
        purpose = getattr(event, "purpose", "agent")
        encoded, trace.chains[purpose] = encode_request(
            trace.chains.get(purpose), event.request, self.redactor
        )
        row = {
            "run_id": event.run_id,
            "seq": event.seq,
            "step": event.step,
            "purpose": purpose,
            "ts": event.ts,
            "model": event.request.get("model"),
            "request_diff": _json.dumps(encoded.diff),
            "request_hash": encoded.hash,
            "messages": encoded.messages,
            "messages_added": encoded.added,
            "messages_dropped": encoded.dropped,
            "response": None,
            "finish_reason": None,
            "input_tokens": None,
            "output_tokens": None,
            "latency_ms": None,
            "attempts": None,
            "response_seq": None,
            "response_ts": None,
            "agent": _step_agent(trace, event),
        }
        trace.rows.llm_calls.append(row)
        trace.waiting_llm[purpose] = row

    def _model_response(self, trace: _RunTrace, event: Any) -> None:
        purpose = getattr(event, "purpose", "agent")
        row = trace.waiting_llm.pop(purpose, None)
        if row is None:  # a response without a request we saw: keep it anyway
            self._other(trace, event)
            return
        response = event.response
        row.update(
            model=response.model or row["model"],
            response=self._response_json(response),
            finish_reason=response.finish_reason,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            latency_ms=response.latency_ms,
            attempts=response.attempts,
            response_seq=event.seq,
            response_ts=event.ts,
        )

    def _text_delta(self, trace: _RunTrace, event: Any) -> None:
        if trace.text is None or trace.text["step"] != event.step:
            self._flush_text(trace)
            trace.text = {
                "seq": event.seq,
                "step": event.step,
                "ts": event.ts,
                "agent": _step_agent(trace, event),
                "parts": [],
            }
        trace.text["parts"].append(event.text)

    def _flush_text(self, trace: _RunTrace) -> None:
        if trace.text is None:
            return
        text, trace.text = trace.text, None
        payload = {"text": "".join(text["parts"]), "deltas": len(text["parts"])}
        trace.rows.events.append(
            {
                "run_id": trace.run["run_id"],
                "seq": text["seq"],
                "step": text["step"],
                "ts": text["ts"],
                "kind": "text_delta",
                "payload": self._json(payload),
                "agent": text["agent"],
            }
        )

    # -- tools -----------------------------------------------------------------------------
    def _tool_row(self, trace: _RunTrace, event: Any, arguments: str | None) -> dict[str, Any]:
        return {
            "run_id": event.run_id,
            "seq": event.seq,
            "step": event.step,
            "ts": event.ts,
            "call_id": event.call_id,
            "tool": event.tool,
            "arguments": arguments,
            "result_kind": None,
            "result": None,
            "error": None,
            "effect": None,
            "duration_ms": None,
            "truncated": None,
            "stops_run": None,
            "finished_seq": None,
            "finished_ts": None,
            "agent": _step_agent(trace, event),
        }

    def _tool_started(self, trace: _RunTrace, event: Any) -> None:
        row = self._tool_row(trace, event, self._json(event.arguments))
        trace.rows.tool_calls.append(row)
        trace.tools[event.call_id] = row

    def _tool_finished(self, trace: _RunTrace, event: Any) -> None:
        row = trace.tools.pop(event.call_id, None)
        if row is None:
            row = self._tool_row(trace, event, self._json(event.arguments))
            trace.rows.tool_calls.append(row)
        result = event.result
        row.update(
            result_kind=str(result.kind),
            result=None if result.data is None else self._json(result.data),
            error=None if result.error is None else self.redactor.text(result.error),
            effect=str(event.effect),
            duration_ms=result.duration_ms,
            truncated=result.truncated,
            stops_run=result.stop,
            finished_seq=event.seq,
            finished_ts=event.ts,
        )

    def _tool_call_rejected(self, trace: _RunTrace, event: Any) -> None:
        # The raw text is kept as a JSON string: it is what the model sent, parseable or not.
        row = self._tool_row(trace, event, self._json(event.raw_arguments))
        row.update(
            result_kind="rejected",
            result=self._json({"reason": event.reason}),
            error=self.redactor.text(event.message),
            finished_seq=event.seq,
            finished_ts=event.ts,
        )
        trace.rows.tool_calls.append(row)

    # -- context and everything else --------------------------------------------------------
    def _context_changed(self, trace: _RunTrace, event: Any) -> None:
        def dumps(value: Any) -> str:
            return _json.dumps(self.redactor.keyed(event.key, value))

        def absent(no_value_expected: bool, value: Any) -> bool:
            return no_value_expected and value is None

        trace.rows.context_diffs.append(
            {
                "run_id": event.run_id,
                "seq": event.seq,
                "step": event.step,
                "ts": event.ts,
                "scope": str(event.scope),
                "key": event.key,
                "op": str(event.op),
                # NULL means "no value" (before an add, after a remove); JSON null is a value.
                "old": None if absent(event.op == "add", event.old) else dumps(event.old),
                "new": None if absent(event.op == "remove", event.new) else dumps(event.new),
                "agent": _step_agent(trace, event),
            }
        )

    def _other(self, trace: _RunTrace, event: Any) -> None:
        payload = event.model_dump(mode="json", exclude=_BASE_FIELDS)
        trace.rows.events.append(
            {
                "run_id": event.run_id,
                "seq": event.seq,
                "step": getattr(event, "step", None),
                "ts": event.ts,
                "kind": event.kind,
                "payload": self._json(payload),
                "agent": _step_agent(trace, event),
            }
        )

    def _json(self, value: Any) -> str:
        """Every JSON column is written through here: redaction cannot be skipped."""
        return self.redactor.json(value)

    def _response_json(self, response: Any) -> str:
        """A model response; a streamed one keeps its chunks, whose fragments are redacted
        joined (a secret split over chunks matches no rule fragment by fragment)."""
        data = _json.plain(response)
        raw = data.get("raw") if isinstance(data, dict) else None
        if isinstance(raw, dict) and raw.get("object") == STREAM_OBJECT:
            data["raw"] = {**raw, "chunks": redact_chunks(raw.get("chunks") or [], self.redactor)}
        return self._json(data)


def _step_agent(trace: _RunTrace, event: Any) -> str | None:
    """A row's `agent`: the event's when it is not the run's (a boundary target's framework
    handed off inside one run), else NULL."""
    agent = getattr(event, "agent", None)
    return None if agent is None or agent == trace.run["agent"] else str(agent)
