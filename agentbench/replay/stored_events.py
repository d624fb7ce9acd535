"""A stored run's rows back into the typed events the runner emitted: `events_of(trace)`.

The recorder folds pairs of events into one row (a model call's request and response, a tool
call's start and finish) and keeps each half's seq and time, so every event comes back with
its own fields, seq and timestamp. The only deliberate loss is the one the recorder documents:
the text deltas of one model call are coalesced into one `TextDelta` (the first delta's seq
and time, the joined text). In rows written before the store kept the second half's seq
(schema 2), the second half follows the first at the same seq. `events` rows are validated by
the event union itself, so a kind added to the union later is rebuilt without a change here;
a kind this version does not know (written by a newer one) is skipped.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from agentbench.runtime.events import (
    EVENT_ADAPTER,
    ContextChanged,
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
from agentbench.runtime.models import ChatResponse, Usage
from agentbench.runtime.tools import ResultKind, ToolResult
from agentbench.trace.errors import StoreFormatError
from agentbench.trace.schema import (
    ContextDiffRecord,
    EventRecord,
    LlmCallRecord,
    RunTrace,
    ToolCallRecord,
)
from agentbench.trace.storage.queries import requests_from_rows


def loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


class _Timeline:
    """Events collected with their seq; `fresh()` hands out seqs for old rows that lack one."""

    def __init__(self, trace: RunTrace) -> None:
        run = trace.run
        self.base = {"run_id": run.run_id, "agent": run.agent}
        self.found: list[tuple[int, int, Any]] = []
        self._next = 1 + max(
            [
                *(r.seq for r in trace.llm_calls),
                *(r.seq for r in trace.tool_calls),
                *(r.seq for r in trace.context_diffs),
                *(r.seq for r in trace.events),
                0,
            ]
        )

    def fresh(self) -> int:
        seq, self._next = self._next, self._next + 1
        return seq

    def add(self, seq: int, event: Any) -> None:
        self.found.append((seq, len(self.found), event))

    def of(self, row: Any) -> dict[str, Any]:
        """The base fields of a row's events: its own agent when it has one (a boundary
        target's framework handed off inside the run), else the run's."""
        agent = getattr(row, "agent", None)
        return self.base if agent is None else {**self.base, "agent": agent}

    def last_agent(self) -> str:
        """The agent of the latest event so far: the one a run finishes with."""
        return max(self.found, key=lambda item: item[:2])[2].agent

    def events(self) -> list[Any]:
        return [event for _, _, event in sorted(self.found, key=lambda item: item[:2])]


def events_of(trace: RunTrace) -> list[Any]:
    """Typed events rebuilt from one stored run's rows, in the order they were emitted."""
    timeline = _Timeline(trace)
    run = trace.run
    timeline.add(
        0,
        RunStarted(
            **timeline.base,
            seq=0,
            ts=run.started_at,
            input=_input(loads(run.input)),
            model=run.model or "",
            parent_run_id=run.parent_run_id,
            context=loads(run.context) or {},
        ),
    )
    _model_calls(trace, timeline)
    for row in trace.tool_calls:
        _tool_call(row, timeline)
    for diff in trace.context_diffs:
        timeline.add(diff.seq, _context_changed(diff, timeline.of(diff)))
    for record in trace.events:
        event = _other(record, timeline.of(record))
        if event is not None:
            timeline.add(record.seq, event)
    if run.stop_reason is not None:
        seq = run.finished_seq if run.finished_seq is not None else timeline.fresh()
        base = {**timeline.base, "agent": timeline.last_agent()}
        timeline.add(seq, _run_finished(trace, seq, base))
    return timeline.events()


def _input(value: Any) -> str | list[dict[str, Any]]:
    return value if isinstance(value, str | list) else "" if value is None else str(value)


def _model_calls(trace: RunTrace, timeline: _Timeline) -> None:
    calls = sorted(trace.llm_calls, key=lambda c: c.seq)
    requests = requests_from_rows(
        [(c.seq, c.purpose, c.request_diff, c.request_hash) for c in calls],
        f"run {trace.run.run_id}",
    )
    for call in calls:
        purpose = _purpose(call)
        timeline.add(
            call.seq,
            ModelRequest(
                **timeline.of(call),
                seq=call.seq,
                ts=call.ts,
                step=call.step or 0,
                request=requests[call.seq],
                purpose=purpose,
            ),
        )
        if call.response is None:
            continue  # the call never answered (a model error, or the process died)
        # Schema 2 kept one seq per row: the response goes right after its request.
        seq = call.response_seq if call.response_seq is not None else call.seq
        timeline.add(
            seq,
            ModelResponse(
                **timeline.of(call),
                seq=seq,
                ts=call.response_ts or call.ts,
                step=call.step or 0,
                response=_response(call),
                purpose=purpose,
            ),
        )


def _purpose(call: LlmCallRecord) -> Any:
    return call.purpose if call.purpose in ("agent", "memory") else "agent"


def _response(call: LlmCallRecord) -> ChatResponse:
    try:
        return ChatResponse.model_validate(loads(call.response))
    except (ValidationError, orjson.JSONDecodeError) as exc:
        raise StoreFormatError(
            f"run {call.run_id} llm call seq {call.seq}: the stored response is not a chat "
            f"response ({str(exc).splitlines()[0]})"
        ) from None


def _tool_call(row: ToolCallRecord, timeline: _Timeline) -> None:
    # What every event of one tool call shares; each event adds its own seq and time.
    call = {
        **timeline.of(row),
        "step": row.step or 0,
        "call_id": row.call_id,
        "tool": row.tool,
    }
    arguments = loads(row.arguments)
    if row.result_kind == "rejected":
        reason = (loads(row.result) or {}).get("reason", "invalid_arguments")
        rejected = ToolCallRejected(
            **call,
            seq=row.seq,
            ts=row.ts,
            raw_arguments=arguments if isinstance(arguments, str) else "",
            reason=reason,
            message=row.error or "",
        )
        timeline.add(row.seq, rejected)
        return
    call["arguments"] = arguments if isinstance(arguments, dict) else {}
    # A row made at the finish (no ToolStarted was seen) has finished_seq == seq.
    if row.finished_seq is None or row.finished_seq != row.seq:
        timeline.add(row.seq, ToolStarted(**call, seq=row.seq, ts=row.ts))
    if row.result_kind is None:
        return  # started, never finished (an incomplete run)
    # Schema 2 kept one seq per row: the finish goes right after its start.
    seq = row.finished_seq if row.finished_seq is not None else row.seq
    result = ToolResult(
        kind=ResultKind(row.result_kind),
        data=loads(row.result),
        error=row.error,
        duration_ms=row.duration_ms or 0.0,
        truncated=bool(row.truncated),
        stop=bool(row.stops_run),
    )
    effect = row.effect if row.effect is not None else "unknown"
    finished = ToolFinished(
        **call, seq=seq, ts=row.finished_ts or row.ts, result=result, effect=effect
    )
    timeline.add(seq, finished)


def _context_changed(diff: ContextDiffRecord, base: dict[str, Any]) -> ContextChanged:
    return ContextChanged(
        **base,
        seq=diff.seq,
        ts=diff.ts,
        step=diff.step or 0,
        scope=diff.scope,
        key=diff.key,
        op=diff.op,
        old=loads(diff.old),
        new=loads(diff.new),
    )


def _other(record: EventRecord, base: dict[str, Any]) -> Any:
    """An `events` row as its typed event (the payload holds every field but the base)."""
    fields = {**(loads(record.payload) or {}), **base, "seq": record.seq, "ts": record.ts}
    if record.step is not None:
        fields["step"] = record.step
    try:
        return EVENT_ADAPTER.validate_python({**fields, "kind": record.kind})
    except ValidationError as exc:
        if _unknown_kind(exc):
            return None  # written by a newer agentbench: kept in the store, not typed here
        raise StoreFormatError(
            f"run {record.run_id} event seq {record.seq} ({record.kind}): the stored payload "
            f"does not match the event: {_first_error(exc)}"
        ) from None


def _unknown_kind(exc: ValidationError) -> bool:
    return any(e["type"] == "union_tag_invalid" for e in exc.errors())


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}"


def _run_finished(trace: RunTrace, seq: int, base: dict[str, Any]) -> RunFinished:
    run = trace.run
    error = loads(run.error)
    return RunFinished(
        **base,
        seq=seq,
        ts=run.finished_at or run.started_at,
        stop_reason=StopReason(run.stop_reason),
        output=loads(run.output),
        error=ErrorInfo.model_validate(error) if error is not None else None,
        usage=Usage(
            input_tokens=run.input_tokens or 0,
            output_tokens=run.output_tokens or 0,
            estimated=bool(run.usage_estimated),
        ),
        iterations=run.iterations or 0,
        duration_ms=run.duration_ms or 0.0,
    )
