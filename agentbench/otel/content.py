"""A model call's request and response read back from a span, whichever convention wrote it.

Instrumentations disagree about where content goes, and each form is read:

* the latest GenAI conventions: `gen_ai.input.messages` / `gen_ai.output.messages` (and
  `gen_ai.system_instructions`, `gen_ai.tool.definitions`) as JSON attributes — agentbench's
  own spans and `opentelemetry-instrumentation-openai-v2` with
  `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`;
* GenAI v1.30 events — log records (or span events) `gen_ai.system.message`,
  `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`
  tied to the span — openai-v2 on its default path with content capture `true`;
* the oldest form: span events `gen_ai.content.prompt` / `gen_ai.content.completion`
  carrying `gen_ai.prompt` / `gen_ai.completion`, and indexed attributes
  `gen_ai.prompt.N.role` / `.content` (OpenLLMetry);
* OpenInference: `input.value` / `output.value` holding the request and response bodies
  (`input.mime_type: application/json`), else `llm.input_messages.N.message.*`.

A span with none of them has no content: `CallContent.missing` says which attributes were
looked for, so the import can say why the run cannot be replayed. Only OpenInference's bodies
and agentbench's own spans hold the whole request; every other form holds the model, the
messages and the settings the span names, and tool definitions only where it has a place for
them, so `CallContent.recorded_fields` says which request fields the span could tell.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agentbench.errors import one_line
from agentbench.otel import bounded_json
from agentbench.otel import conventions as c
from agentbench.otel.messages import (
    ContentError,
    arguments_in,
    from_parts,
    response_from_output,
    tool_definitions_in,
)
from agentbench.otel.otlp_json import LogRecord, Span
from agentbench.runtime.completions import CompletionFormatError, parse_completion
from agentbench.runtime.models import ChatResponse, ToolCall, Usage

_LEGACY_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
NO_CONTENT = (
    "the span carries no message content (looked for gen_ai.input.messages, GenAI message "
    "events, gen_ai.prompt.*, and OpenInference input.value): record it with "
    "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and "
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only"
)


@dataclass
class CallContent:
    """What a chat span says was sent and answered; `missing` when it carries no content."""

    request: dict[str, Any]
    response: ChatResponse
    missing: str | None = None
    form: str = ""  # which convention the content came in, for the import's summary
    # The top-level request fields the span recorded (None: the whole request); the others
    # (tool definitions where the form has no place for them, tool_choice, settings the span
    # does not name) were sent or not, nobody can tell.
    recorded_fields: frozenset[str] | None = None


class SpanContentError(ValueError):
    """Content that is there but malformed: names the span, file line and attribute."""


def _json(value: Any, span: Span, attribute: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return bounded_json.loads(value)
    except bounded_json.JsonBoundsError as exc:
        raise SpanContentError(f"{span.where}: attribute {attribute}: {exc}") from None
    except ValueError as exc:
        raise SpanContentError(
            f"{span.where}: attribute {attribute} is not JSON ({one_line(exc, 120)})"
        ) from None


def _params(span: Span) -> dict[str, Any]:
    """Request parameters the span states (convention names, then agentbench's own)."""
    attributes = span.attributes
    params: dict[str, Any] = {}
    for key, name in c.REQUEST_PARAMETERS.items():
        if name in attributes and key != "max_completion_tokens":
            params[key] = attributes[name]
    rest = attributes.get(c.REQUEST_REST)
    if rest is not None:
        extra = _json(rest, span, c.REQUEST_REST)
        if isinstance(extra, dict):
            if "max_completion_tokens" in extra:
                params.pop("max_tokens", None)
            params.update(extra)
    return params


def _usage(span: Span) -> Usage:
    attributes = span.attributes
    found_in = attributes.get(c.INPUT_TOKENS, attributes.get("llm.token_count.prompt", 0))
    found_out = attributes.get(c.OUTPUT_TOKENS, attributes.get("llm.token_count.completion", 0))
    return Usage(
        input_tokens=int(found_in or 0),
        output_tokens=int(found_out or 0),
        estimated=bool(attributes.get(c.USAGE_ESTIMATED, False)),
    )


def _finish_reasons(span: Span) -> list[str]:
    found = span.attributes.get(c.FINISH_REASONS) or span.attributes.get("llm.finish_reason")
    if isinstance(found, str):
        return [found]
    return [str(reason) for reason in found or []]


def _model(span: Span) -> str:
    attributes = span.attributes
    return str(
        attributes.get(c.REQUEST_MODEL)
        or attributes.get("llm.model_name")
        or attributes.get(c.RESPONSE_MODEL)
        or ""
    )


def _response(
    span: Span, text: str | None, calls: list[ToolCall], finish: str | None, reasoning: str | None
) -> ChatResponse:
    attributes = span.attributes
    latency = attributes.get(c.LATENCY_MS)
    return ChatResponse(
        text=text,
        tool_calls=calls,
        finish_reason=finish or ("tool_calls" if calls else "stop"),
        usage=_usage(span),
        latency_ms=float(latency) if latency is not None else (span.end_ns - span.start_ns) / 1e6,
        model=attributes.get(c.RESPONSE_MODEL) or _model(span) or None,
        reasoning=reasoning,
        attempts=int(attributes.get(c.ATTEMPTS, 1) or 1),
    )


def _request(span: Span, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
    request: dict[str, Any] = {"model": _model(span), "messages": messages}
    if tools:
        request["tools"] = tools
    request.update(_params(span))
    return request


def _recorded(request: dict[str, Any], *, tools: bool) -> frozenset[str]:
    """The fields a span that holds part of the request recorded: the model, the messages,
    the settings it names, and `tools` when it has a place for tool definitions."""
    return frozenset(request) | {"model", "messages"} | ({"tools"} if tools else set())


# -- the latest conventions ------------------------------------------------------------------------
def _latest(span: Span) -> CallContent | None:
    attributes = span.attributes
    if c.INPUT_MESSAGES not in attributes and c.OUTPUT_MESSAGES not in attributes:
        return None
    raw_input = _json(attributes.get(c.INPUT_MESSAGES, "[]"), span, c.INPUT_MESSAGES)
    if not isinstance(raw_input, list):
        raise SpanContentError(f"{span.where}: attribute {c.INPUT_MESSAGES}: expected a list")
    messages: list[dict[str, Any]] = []
    instructions = _json(attributes.get(c.SYSTEM_INSTRUCTIONS), span, c.SYSTEM_INSTRUCTIONS)
    if instructions:
        text = "".join(p.get("content", "") for p in instructions if isinstance(p, dict))
        messages.append({"role": "system", "content": text})
    try:
        messages += [from_parts(message, i) for i, message in enumerate(raw_input)]
        output = _json(attributes.get(c.OUTPUT_MESSAGES), span, c.OUTPUT_MESSAGES)
        text, calls, finish, reasoning = (
            response_from_output(output, _finish_reasons(span))
            if output is not None
            else (None, [], None, None)
        )
    except ContentError as exc:
        raise SpanContentError(f"{span.where}: attribute {c.INPUT_MESSAGES}: {exc}") from None
    # agentbench's own spans carry every other field in REQUEST_REST: the whole request.
    own = c.RUN_ID in attributes
    definitions = _json(attributes.get(c.TOOL_DEFINITIONS), span, c.TOOL_DEFINITIONS)
    tools = tool_definitions_in(definitions, whole=own)
    finish = finish or next(iter(_finish_reasons(span)), None)
    request = _request(span, messages, tools)
    return CallContent(
        request,
        _response(span, text, calls, finish, reasoning),
        form="gen_ai.input.messages",
        recorded_fields=None if own else _recorded(request, tools=c.TOOL_DEFINITIONS in attributes),
    )


# -- GenAI v1.30 events (log records or span events) -----------------------------------------------
def _legacy_message(role: str, body: dict[str, Any]) -> dict[str, Any]:
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": body.get("id"),
            "content": _as_text(body.get("content")),
        }
    message: dict[str, Any] = {"role": role, "content": body.get("content")}
    if body.get("tool_calls"):
        message["tool_calls"] = [_openai_call(call) for call in body["tool_calls"]]
    elif message["content"] is None:
        message["content"] = ""
    return message


def _openai_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {
            "name": function.get("name"),
            "arguments": arguments_in(function.get("arguments")),
        },
    }


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _events(span: Span, logs: list[LogRecord]) -> CallContent | None:
    found = [(log.time_ns, log.event_name, log.body) for log in logs]
    found += [
        (event.time_ns, event.name, event.attributes)
        for event in span.events
        if event.name in _LEGACY_EVENTS or event.name == "gen_ai.choice"
    ]
    if not any(name in _LEGACY_EVENTS or name == "gen_ai.choice" for _, name, _ in found):
        return None
    bodies = [
        body
        for _, name, body in found
        if name in _LEGACY_EVENTS and name != "gen_ai.assistant.message"
    ]
    if bodies and not any(isinstance(body, dict) and "content" in body for body in bodies):
        # The events are emitted with content capture off too, holding only ids and roles.
        return CallContent(
            _request(span, [], []),
            _response(span, None, [], next(iter(_finish_reasons(span)), None), None),
            missing=NO_CONTENT,
            form="GenAI events (v1.30) without content",
        )
    messages: list[dict[str, Any]] = []
    choice: dict[str, Any] | None = None
    for _, name, body in found:  # in the order emitted (already in file order)
        body = body if isinstance(body, dict) else {"content": body}
        if name in _LEGACY_EVENTS:
            messages.append(_legacy_message(_LEGACY_EVENTS[name], body))
        elif name == "gen_ai.choice" and choice is None:
            choice = body
    text, calls, finish = None, [], None
    if choice is not None:
        message = choice.get("message") or {}
        text = message.get("content")
        calls = [
            ToolCall(
                name=(call.get("function") or {}).get("name") or "",
                arguments=arguments_in((call.get("function") or {}).get("arguments")),
                **({"id": call["id"]} if call.get("id") else {}),
            )
            for call in message.get("tool_calls") or []
        ]
        finish = choice.get("finish_reason")
    finish = finish or next(iter(_finish_reasons(span)), None)
    request = _request(span, messages, [])
    return CallContent(
        request,
        _response(span, text, calls, finish, None),
        form="GenAI events (v1.30)",
        recorded_fields=_recorded(request, tools=False),
    )


# -- the oldest conventions: gen_ai.prompt / gen_ai.completion -------------------------------------
def _indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`prefix.0.role`, `prefix.0.content`, `prefix.0.tool_calls.1.name`… as a list of dicts."""
    items: dict[Any, Any] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix + "."):
            continue
        parts = key[len(prefix) + 1 :].split(".")
        if not parts[0].isdigit():
            continue
        node = items
        for part in parts[:-1]:
            node = node.setdefault(int(part) if part.isdigit() else part, {})
        node[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    listed = _listed(items)
    return [item for item in listed if isinstance(item, dict)] if isinstance(listed, list) else []


def _listed(node: Any) -> Any:
    if isinstance(node, dict) and node and all(isinstance(k, int) for k in node):
        return [_listed(node[i]) for i in sorted(node)]
    if isinstance(node, dict):
        return {k: _listed(v) for k, v in node.items()}
    return node


def _prompt_message(item: dict[str, Any]) -> dict[str, Any]:
    role = item.get("role", "user")
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": item.get("tool_call_id"),
            "content": _as_text(item.get("content")),
        }
    message: dict[str, Any] = {"role": role, "content": item.get("content")}
    calls = item.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {
                    "name": call.get("name") or (call.get("function") or {}).get("name"),
                    "arguments": arguments_in(
                        call.get("arguments", (call.get("function") or {}).get("arguments"))
                    ),
                },
            }
            for call in calls
        ]
    elif message["content"] is None:
        message["content"] = ""
    return message


def _prompt_attributes(span: Span) -> CallContent | None:
    attributes = dict(span.attributes)
    for event in span.events:  # gen_ai.content.prompt / .completion events carry JSON
        for key in ("gen_ai.prompt", "gen_ai.completion"):
            if key in event.attributes:
                attributes[key] = event.attributes[key]
    prompt: Any = attributes.get("gen_ai.prompt")
    completion: Any = attributes.get("gen_ai.completion")
    if prompt is not None:
        prompt = _json(prompt, span, "gen_ai.prompt")
    else:
        prompt = _indexed(attributes, "gen_ai.prompt") or None
    if completion is not None:
        completion = _json(completion, span, "gen_ai.completion")
    else:
        completion = _indexed(attributes, "gen_ai.completion") or None
    if prompt is None and completion is None:
        return None
    if not isinstance(prompt, list) or (
        completion is not None and not isinstance(completion, list)
    ):
        raise SpanContentError(
            f"{span.where}: attribute gen_ai.prompt / gen_ai.completion: expected a list of "
            "messages"
        )
    messages = [_prompt_message(item) for item in prompt if isinstance(item, dict)]
    answer = _prompt_message(completion[0]) if completion else {"content": None}
    calls = [
        ToolCall(
            name=call["function"]["name"] or "",
            arguments=call["function"]["arguments"],
            **({"id": call["id"]} if call.get("id") else {}),
        )
        for call in answer.get("tool_calls") or []
    ]
    finish = (completion[0].get("finish_reason") if completion else None) or next(
        iter(_finish_reasons(span)), None
    )
    text = answer.get("content") if not calls or answer.get("content") else None
    request = _request(span, messages, [])
    return CallContent(
        request,
        _response(span, text, calls, finish, None),
        form="gen_ai.prompt attributes (pre-1.27)",
        recorded_fields=_recorded(request, tools=False),
    )


# -- OpenInference ---------------------------------------------------------------------------------
def _openinference(span: Span) -> CallContent | None:
    attributes = span.attributes
    if attributes.get("openinference.span.kind") != "LLM":
        return None
    request = None
    recorded: frozenset[str] | None = None  # the body: the whole request
    if attributes.get("input.mime_type") == "application/json" and "input.value" in attributes:
        request = _json(attributes["input.value"], span, "input.value")
    if not isinstance(request, dict) or "messages" not in request:
        listed = _indexed(attributes, "llm.input_messages")
        if not listed:
            return None
        messages = [_prompt_message(_flat_message(item)) for item in listed]
        request = _request(span, messages, _openinference_tools(attributes))
        tools = any(key.startswith("llm.tools.") for key in attributes)
        recorded = _recorded(request, tools=tools)
    response = None
    if attributes.get("output.mime_type") == "application/json" and "output.value" in attributes:
        body = _json(attributes["output.value"], span, "output.value")
        try:
            parsed = parse_completion(body) if isinstance(body, dict) else None
        except CompletionFormatError as exc:
            raise SpanContentError(f"{span.where}: attribute output.value: {exc}") from None
        if parsed is not None:
            response = _response(
                span, parsed.text, parsed.tool_calls, parsed.finish_reason, parsed.reasoning
            )
    if response is None:
        listed = _indexed(attributes, "llm.output_messages")
        answer = _prompt_message(_flat_message(listed[0])) if listed else {"content": None}
        calls = [
            ToolCall(
                name=call["function"]["name"] or "",
                arguments=call["function"]["arguments"],
                **({"id": call["id"]} if call.get("id") else {}),
            )
            for call in answer.get("tool_calls") or []
        ]
        text = answer.get("content") if not calls or answer.get("content") else None
        response = _response(span, text, calls, next(iter(_finish_reasons(span)), None), None)
    return CallContent(request, response, form="OpenInference", recorded_fields=recorded)


def _flat_message(item: dict[str, Any]) -> dict[str, Any]:
    """OpenInference's `message.role`, `message.tool_calls.N.tool_call.function.name`… flattened."""
    message = item.get("message", item)
    calls = []
    for call in message.get("tool_calls") or []:
        inner = call.get("tool_call", call)
        function = inner.get("function") or {}
        calls.append(
            {
                "id": inner.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    if calls:
        out["tool_calls"] = calls
    return out


def _openinference_tools(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    tools = []
    for item in _indexed(attributes, "llm.tools"):
        schema = (item.get("tool") or {}).get("json_schema")
        if isinstance(schema, str):
            try:
                tools.append(bounded_json.loads(schema))
            except ValueError:
                continue
    return tools


def call_content(span: Span, logs: list[LogRecord]) -> CallContent:
    """The span's request and response, from whichever form carries them; SpanContentError
    naming the span when what it carries has a shape no form has (a message that is a number,
    a token count that is a word)."""
    with read_from(span, "its message content"):
        return _call_content(span, logs)


@contextmanager
def read_from(span: Span, what: str) -> Iterator[None]:
    """A value of the wrong shape met while reading `what` of `span` (a message that is a
    number, a token count that is a word) as one SpanContentError naming the span."""
    try:
        yield
    except SpanContentError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        raise SpanContentError(
            f"{span.where}: {what} cannot be read ({one_line(exc, 160)})"
        ) from None


def _call_content(span: Span, logs: list[LogRecord]) -> CallContent:
    for reader in (_latest, _openinference, _prompt_attributes):
        found = reader(span)
        if found is not None:
            return found
    found = _events(span, logs)
    if found is not None:
        return found
    return CallContent(
        _request(span, [], []),
        _response(span, None, [], next(iter(_finish_reasons(span)), None), None),
        missing=NO_CONTENT,
    )
