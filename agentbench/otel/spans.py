"""A run's typed events as GenAI spans: one `invoke_agent` span per run, `chat` and `execute_tool`.

`SpanWriter` is fed events in order — live by `OTelHook`, or rebuilt from the store by the
export — and opens and closes spans on an OpenTelemetry tracer with the events' own times, so
a stored run exports with the times it happened. A handed-off run's span is a child of the
run that handed off; a model call or a tool call is a child of its run. What has a
convention name uses it; what replay needs beyond the conventions (stop reason, three-state
tool results, request parameters without a convention name) goes under `agentbench.*`, so
agentbench's own spans import back whole. Content is written only when `content` is on.

Tool definitions go out in the conventions' flat shape (`agentbench.otel.messages`). Given an
`McpToolIndex` (the live hook gives one), a tool call to an MCP server's tool carries the MCP
conventions' attributes on its `execute_tool` span (`agentbench.otel.mcp`): which tools are an
MCP server's is known only in the process that made them, not from a stored run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from agentbench.otel import conventions as c
from agentbench.otel.mcp import McpToolIndex, tool_error_attributes
from agentbench.otel.messages import output_message, to_parts, tool_definitions_out

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Events of a run that become span events on its `invoke_agent` span (kept whole).
_SPAN_EVENTS = ("handoff", "guard_triggered", "memory_decision", "context_changed")
# Of those, the ones whose fields carry content (context values, summaries).
_CONTENT_EVENTS = ("context_changed", "memory_decision")
_ENDED_KEPT = 1024  # ended runs remembered as parents for the runs they handed off to


def nanos(ts: datetime) -> int:
    """A timestamp as nanoseconds since 1970, exact to the microsecond."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class _OpenRun:
    span: Span
    context: otel_context.Context
    conversation_id: str
    calls: dict[str, Span] = field(default_factory=dict)  # open chat spans, by purpose
    tools: dict[str, Span] = field(default_factory=dict)  # open tool spans, by call id
    mcp_tools: dict[str, Any] = field(default_factory=dict)  # its MCP servers' tools, by name


class SpanWriter:
    """Turns events into spans on `tracer` (call it with each event, in order)."""

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        content: bool,
        scrub: Callable[[Any], Any] = lambda value: value,
        conversation_of: Callable[[Any], str | None] | None = None,
        before_span: Callable[[str, Any], None] | None = None,
        mcp: McpToolIndex | None = None,
    ) -> None:
        self.tracer = tracer
        self.content = content
        self._scrub = scrub  # the redactor's, live; stored runs were redacted when recorded
        self.provider_attribute = c.provider_attribute()
        self._conversation_of = conversation_of
        self._before_span = before_span  # the export plans each span's id here
        self._mcp = mcp  # tells a run's MCP tools (live only: a stored run cannot say)
        self._runs: dict[str, _OpenRun] = {}
        # Runs ended lately: a router's or chain's run ends before the run it handed off to
        # starts, and that run's span is still its child.
        self._ended: dict[str, _OpenRun] = {}

    def __call__(self, event: Any) -> None:
        kind = event.kind
        if kind == "run_started":
            self._run_started(event)
            return
        run = self._runs.get(event.run_id)
        if run is None:
            return  # a run whose start this writer did not see (attached mid-run)
        handler = getattr(self, f"_{kind}", None)
        if handler is not None:
            handler(run, event)
        elif kind in _SPAN_EVENTS and (self.content or kind not in _CONTENT_EVENTS):
            self._span_event(run, event)

    def _json(self, value: Any) -> str:
        return dumps(self._scrub(value))

    def _text(self, text: str) -> str:
        scrubbed = self._scrub(text)
        return scrubbed if isinstance(scrubbed, str) else str(scrubbed)

    def close(self) -> None:
        """End the spans of runs that never finished (the process is going away)."""
        for run_id in list(self._runs):
            run = self._runs.pop(run_id)
            for span in [*run.calls.values(), *run.tools.values(), run.span]:
                span.set_status(Status(StatusCode.ERROR, "the run did not finish"))
                span.end()

    # -- runs --------------------------------------------------------------------------------
    def _start(self, name: str, key: Any, **kwargs: Any) -> Span:
        if self._before_span is not None:
            self._before_span(name, key)
        return self.tracer.start_span(name, **kwargs)

    def _run_started(self, event: Any) -> None:
        parent = (
            self._runs.get(event.parent_run_id) or self._ended.get(event.parent_run_id)
            if event.parent_run_id
            else None
        )
        conversation = (
            parent.conversation_id
            if parent is not None
            else (self._conversation_of(event) if self._conversation_of else None) or event.run_id
        )
        attributes: dict[str, Any] = {
            c.OPERATION: "invoke_agent",
            c.AGENT_NAME: event.agent,
            c.CONVERSATION_ID: conversation,
            c.RUN_ID: event.run_id,
            self.provider_attribute: "openai",
        }
        if event.model:
            attributes[c.REQUEST_MODEL] = event.model
        if event.parent_run_id:
            attributes[c.PARENT_RUN_ID] = event.parent_run_id
        if self.content:
            attributes[c.RUN_INPUT] = self._json(event.input)
            if event.context:
                attributes[c.RUN_CONTEXT] = self._json(event.context)
        span = self._start(
            f"invoke_agent {event.agent}",
            event,
            context=parent.context if parent is not None else None,
            kind=SpanKind.INTERNAL,
            start_time=nanos(event.ts),
            attributes=attributes,
        )
        self._runs[event.run_id] = _OpenRun(
            span, trace.set_span_in_context(span), conversation or event.run_id
        )

    def _run_finished(self, run: _OpenRun, event: Any) -> None:
        del self._runs[event.run_id]
        self._ended[event.run_id] = run
        if len(self._ended) > _ENDED_KEPT:
            del self._ended[next(iter(self._ended))]
        for span in [*run.calls.values(), *run.tools.values()]:
            span.set_status(Status(StatusCode.ERROR, f"run ended ({event.stop_reason})"))
            span.end(end_time=nanos(event.ts))
        span = run.span
        span.set_attributes(
            {
                c.STOP_REASON: str(event.stop_reason),
                c.INPUT_TOKENS: event.usage.input_tokens,
                c.OUTPUT_TOKENS: event.usage.output_tokens,
                c.ITERATIONS: event.iterations,
            }
        )
        if event.usage.estimated:
            span.set_attribute(c.USAGE_ESTIMATED, True)
        if self.content and event.output is not None:
            span.set_attribute(c.RUN_OUTPUT, self._json(event.output))
        if event.error is not None:
            span.set_attribute(c.ERROR_TYPE, event.error.type)
            span.set_attribute(c.RUN_ERROR, self._json(event.error.model_dump(mode="json")))
            span.set_status(Status(StatusCode.ERROR, self._text(event.error.message)))
        elif str(event.stop_reason) in ("error", "timeout", "cancelled"):
            span.set_attribute(c.ERROR_TYPE, str(event.stop_reason))
            span.set_status(Status(StatusCode.ERROR, str(event.stop_reason)))
        span.end(end_time=nanos(event.ts))

    def _span_event(self, run: _OpenRun, event: Any) -> None:
        fields = event.model_dump(mode="json", exclude={"run_id", "agent", "kind", "ts"})
        run.span.add_event(
            c.EVENT_PREFIX + event.kind,
            {
                key: self._text(value)
                if isinstance(value, str)
                else value
                if isinstance(value, int | float | bool)
                else self._json(value)
                for key, value in fields.items()
                if value is not None
            },
            timestamp=nanos(event.ts),
        )

    # -- model calls ---------------------------------------------------------------------------
    def _model_request(self, run: _OpenRun, event: Any) -> None:
        request = event.request
        model = request.get("model") or ""
        attributes: dict[str, Any] = {
            c.OPERATION: "chat",
            self.provider_attribute: "openai",
            c.REQUEST_MODEL: model,
            c.AGENT_NAME: event.agent,
            c.CONVERSATION_ID: run.conversation_id,
            c.RUN_ID: event.run_id,
            c.STEP: event.step,
            c.PURPOSE: event.purpose,
        }
        for key, name in c.REQUEST_PARAMETERS.items():
            value = request.get(key)
            if value is None:
                continue
            if key == "stop":
                value = [value] if isinstance(value, str) else list(value)
            if isinstance(value, str | int | float | bool | list):
                attributes[name] = value
        rest = {k: v for k, v in request.items() if k not in ("model", "messages", "tools")}
        if rest:
            attributes[c.REQUEST_REST] = self._json(rest)
        if self.content:
            messages = [to_parts(m) for m in request.get("messages", [])]
            attributes[c.INPUT_MESSAGES] = self._json(messages)
            if request.get("tools"):
                tools = request["tools"]
                flat = tool_definitions_out(tools) if isinstance(tools, list) else tools
                attributes[c.TOOL_DEFINITIONS] = self._json(flat)
        if self._mcp is not None and event.purpose == "agent":
            tools = request.get("tools")
            run.mcp_tools = self._mcp.tools_of(tools) if isinstance(tools, list) else {}
        run.calls[event.purpose] = self._start(
            f"chat {model}".strip(),
            event,
            context=run.context,
            kind=SpanKind.CLIENT,
            start_time=nanos(event.ts),
            attributes=attributes,
        )

    def _model_response(self, run: _OpenRun, event: Any) -> None:
        span = run.calls.pop(event.purpose, None)
        if span is None:
            return
        response = event.response
        attributes: dict[str, Any] = {
            c.FINISH_REASONS: [response.finish_reason or "stop"],
            c.INPUT_TOKENS: response.usage.input_tokens,
            c.OUTPUT_TOKENS: response.usage.output_tokens,
            c.LATENCY_MS: response.latency_ms,
            c.ATTEMPTS: response.attempts,
        }
        if response.model:
            attributes[c.RESPONSE_MODEL] = response.model
        if response.usage.estimated:
            attributes[c.USAGE_ESTIMATED] = True
        if self.content:
            attributes[c.OUTPUT_MESSAGES] = self._json([output_message(response)])
        span.set_attributes(attributes)
        span.end(end_time=nanos(event.ts))

    # -- tool calls ------------------------------------------------------------------------------
    def _tool_attributes(self, run: _OpenRun, event: Any) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            c.OPERATION: "execute_tool",
            c.TOOL_NAME: event.tool,
            c.TOOL_CALL_ID: event.call_id,
            c.TOOL_TYPE: "function",
            c.AGENT_NAME: event.agent,
            c.CONVERSATION_ID: run.conversation_id,
            c.RUN_ID: event.run_id,
            c.STEP: event.step,
        }
        return attributes

    def _tool_started(self, run: _OpenRun, event: Any) -> None:
        attributes = self._tool_attributes(run, event)
        mcp_tool = run.mcp_tools.get(event.tool)
        if mcp_tool is not None:  # the MCP conventions' attributes, on the execute_tool span
            mcp = McpToolIndex.started(mcp_tool)
            for key, value in mcp.items():
                attributes[key] = self._text(value) if isinstance(value, str) else value
        if self.content:
            attributes[c.TOOL_ARGUMENTS] = self._json(event.arguments)
        run.tools[event.call_id] = self._start(
            f"execute_tool {event.tool}",
            event,
            context=run.context,
            kind=SpanKind.INTERNAL,
            start_time=nanos(event.ts),
            attributes=attributes,
        )

    def _tool_finished(self, run: _OpenRun, event: Any) -> None:
        span = run.tools.pop(event.call_id, None)
        if span is None:  # finished without a start we saw: one short span
            self._tool_started(run, event)
            span = run.tools.pop(event.call_id)
        result = event.result
        kind = str(result.kind)
        attributes: dict[str, Any] = {
            c.RESULT_KIND: kind,
            c.TOOL_EFFECT: str(event.effect),
        }
        if result.truncated:
            attributes[c.TOOL_TRUNCATED] = True
        if result.stop:
            attributes[c.TOOL_STOPS] = True
        if self.content:
            attributes[c.TOOL_RESULT] = self._json(result.data)
            if result.error is not None:
                attributes[c.TOOL_ERROR] = self._text(result.error)
        mcp_tool = run.mcp_tools.get(event.tool)
        if mcp_tool is not None:
            attributes.update(McpToolIndex.session(mcp_tool))  # a session started by this call
            attributes.update(tool_error_attributes(kind, result.error))
        span.set_attributes(attributes)
        if kind == "system_error":
            if mcp_tool is None:
                span.set_attribute(c.ERROR_TYPE, "system_error")
            span.set_status(Status(StatusCode.ERROR, self._text(result.error or "system error")))
        elif mcp_tool is not None and kind == "business_failure":
            # The MCP conventions: isError is a failed call (error.type tool_error). The
            # status has no description: the tool's own words are content.
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=nanos(event.ts))

    def _tool_call_rejected(self, run: _OpenRun, event: Any) -> None:
        attributes = self._tool_attributes(run, event)
        attributes[c.TOOL_REJECTED] = event.reason
        attributes[c.ERROR_TYPE] = event.reason
        if self.content:
            attributes[c.RAW_ARGUMENTS] = self._text(event.raw_arguments)
            attributes[c.TOOL_ERROR] = self._text(event.message)
        span = self._start(
            f"execute_tool {event.tool}",
            event,
            context=run.context,
            kind=SpanKind.INTERNAL,
            start_time=nanos(event.ts),
            attributes=attributes,
        )
        span.set_status(Status(StatusCode.ERROR, event.reason))
        span.end(end_time=nanos(event.ts))
