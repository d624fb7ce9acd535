"""An imported run told as the typed events the runtime would have emitted.

The trace recorder takes these as it takes a live run's, so an imported run is stored,
redacted and read back exactly like a recorded one. Events are put in the order of their
spans' times (a model call's request at its start, its response at its end); the tool
results of a program that ran its tools without spans come from the tool messages the next
model call sent. An event is its run's agent's, but where agentbench's own span names another
(a boundary target's run, whose calls show the model another system prompt or tool list).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentbench.otel import conventions as c
from agentbench.otel.grouping import ImportedRun, ImportedTool, loads
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
from agentbench.runtime.tools import ToolResult

_REJECTIONS = ("unknown_tool", "invalid_json", "invalid_arguments")


def _ts(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1000 / 1e6, UTC).replace(
        microsecond=(ns // 1000) % 1_000_000
    )


def _input_of(run: ImportedRun) -> Any:
    attributes = run.root.attributes
    if c.RUN_INPUT in attributes:
        return loads(attributes[c.RUN_INPUT])
    for _, content in run.calls:
        said = [
            m
            for m in content.request.get("messages", [])
            if m.get("role") not in ("system", "developer")
        ]
        if len(said) == 1 and said[0].get("role") == "user":
            text = said[0].get("content")
            return text if isinstance(text, str) else said
        if said:  # a later turn of a chat: the program was handed the dialogue so far
            return said
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
                    result=ToolResult.ok(loads(results[call.id])),
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
        error = ErrorInfo.model_validate(loads(attributes[c.RUN_ERROR]))
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


class _Timeline:
    """Events of a run collected with their times, then ordered and numbered."""

    def __init__(self) -> None:
        self._items: list[tuple[int, int, Any, dict[str, Any]]] = []

    def add(self, ns: int, event_type: Any, **fields: Any) -> None:
        self._items.append((ns, len(self._items), event_type, {"ts": _ts(ns), **fields}))

    def events(self, base: dict[str, Any]) -> list[Any]:
        made = []
        for seq, (_, _, event_type, fields) in enumerate(sorted(self._items, key=lambda i: i[:2])):
            if isinstance(event_type, str):  # an agentbench span event: any kind of the union
                fields.pop("seq", None)
                made.append(
                    EVENT_ADAPTER.validate_python(
                        {**base, **fields, "seq": seq, "kind": event_type}
                    )
                )
            else:
                made.append(event_type(**{**base, **fields}, seq=seq))
        return made


def _step_of(span_attributes: dict[str, Any], default: int) -> int:
    return int(span_attributes.get(c.STEP, default))


def _agent_of(span: Any) -> dict[str, Any]:
    """A span's own agent name, when it has one: a boundary target's framework may hand off
    inside one run, so its spans name different agents under one `invoke_agent`."""
    name = span.attributes.get(c.AGENT_NAME) if span is not None else None
    return {"agent": name} if isinstance(name, str) and name else {}


def _model_calls(timeline: _Timeline, run: ImportedRun) -> None:
    for number, (span, content) in enumerate(run.calls, 1):
        purpose = "memory" if span.attributes.get(c.PURPOSE) == "memory" else "agent"
        step = _step_of(span.attributes, number)
        agent = _agent_of(span)
        timeline.add(
            span.start_ns,
            ModelRequest,
            step=step,
            request=content.request,
            purpose=purpose,
            **agent,
        )
        timeline.add(
            span.end_ns,
            ModelResponse,
            step=step,
            response=content.response,
            purpose=purpose,
            **agent,
        )


def _tool_calls(timeline: _Timeline, run: ImportedRun) -> None:
    steps = [
        (span.start_ns, _step_of(span.attributes, i)) for i, (span, _) in enumerate(run.calls, 1)
    ]
    for tool in run.tools or _inferred_tools(run):
        step = _step_of(tool.span.attributes, 0) if tool.span is not None else 0
        if not step:  # the step of the model call that asked for it
            step = max((s for ns, s in steps if ns <= tool.start_ns), default=1)
        common = {"step": step, "call_id": tool.call_id, "tool": tool.name, **_agent_of(tool.span)}
        if tool.rejected:
            reason = tool.rejected if tool.rejected in _REJECTIONS else "invalid_arguments"
            message = str(tool.span.attributes.get(c.TOOL_ERROR, "")) if tool.span else ""
            timeline.add(
                tool.start_ns,
                ToolCallRejected,
                raw_arguments=tool.arguments,
                reason=reason,
                message=message,
                **common,
            )
            continue
        # An agentbench call the run ended before it finished was started only; anyone
        # else's tool span with no result and no later message is left out.
        own = tool.span is not None and c.RUN_ID in tool.span.attributes
        if tool.result is None and not own:
            continue
        arguments = loads(tool.arguments)
        if not isinstance(arguments, dict):
            arguments = {"arguments": tool.arguments}
        timeline.add(tool.start_ns, ToolStarted, arguments=arguments, **common)
        if tool.result is not None:
            timeline.add(
                tool.end_ns,
                ToolFinished,
                arguments=arguments,
                result=tool.result,
                effect=tool.effect,
                **common,
            )


def _span_events(timeline: _Timeline, run: ImportedRun, run_ids: dict[str, str]) -> None:
    """agentbench's own handoffs, guards, memory decisions and context changes."""
    for ns, kind, fields in run.span_events:
        decoded = {k: loads(v) if k in ("old", "new", "detail") else v for k, v in fields.items()}
        if kind == "handoff" and decoded.get("child_run_id"):
            decoded["child_run_id"] = run_ids.get(decoded["child_run_id"], decoded["child_run_id"])
        timeline.add(ns, kind, **decoded)


def _finished(run: ImportedRun, base: dict[str, Any], seq: int) -> RunFinished:
    attributes = run.root.attributes
    stop, error = _stop_reason(run)
    if c.RUN_OUTPUT in attributes:
        output = loads(attributes[c.RUN_OUTPUT])
    else:
        output = run.calls[-1][1].response.text if run.calls else None
    usage = Usage()
    for _, content in run.calls:
        usage = usage + content.response.usage
    end = run.end_ns()
    return RunFinished(
        **base,
        seq=seq,
        ts=_ts(end),
        stop_reason=stop,
        output=output,
        error=error,
        usage=usage,
        iterations=int(attributes.get(c.ITERATIONS, len(run.calls)) or 0),
        duration_ms=(end - run.start_ns()) / 1e6,
    )


def run_events(run: ImportedRun, run_ids: dict[str, str]) -> list[Any]:
    """The run told as the runtime's typed events, in order, numbered from 0."""
    base = {"run_id": run.run_id, "agent": run.agent}
    attributes = run.root.attributes
    first_model = run.calls[0][1].request.get("model") if run.calls else ""
    timeline = _Timeline()
    timeline.add(
        run.start_ns(),
        RunStarted,
        input=_input_of(run),
        model=str(attributes.get(c.REQUEST_MODEL) or first_model or ""),
        parent_run_id=run_ids.get(run.parent.key) if run.parent is not None else None,
        context=loads(attributes.get(c.RUN_CONTEXT)) or {},
    )
    _model_calls(timeline, run)
    _tool_calls(timeline, run)
    _span_events(timeline, run, run_ids)
    events = timeline.events(base)
    # A run finishes with the agent of its last step, as `replay.stored_events` reads one.
    last = events[-1].agent if events else run.agent
    events.append(_finished(run, {**base, "agent": last}, len(events)))
    return events


def child_ids(run: ImportedRun) -> dict[str, str]:
    """agentbench's own spans name the original run ids; map them to the imported ones."""
    original = run.root.attributes.get(c.RUN_ID)
    return {str(original): run.run_id} if original else {}
