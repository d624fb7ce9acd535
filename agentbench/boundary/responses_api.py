"""The OpenAI Responses API (`POST /v1/responses`) as agentbench's one request and response shape.

A boundary target's Responses traffic is read here: a request becomes the chat-completions-shaped
dict agentbench's own runtime sends (`normalize_request`, from `responses_request`), so drift,
fingerprints, reference policies and the trajectory work unchanged; a response body or event
stream becomes the `ChatResponse` a chat completion does. The other way, a `ChatResponse` is
written as a Responses body or as its stream of events (`response.created` …
`response.completed`, with sequence numbers), item ids derived from the response id and call
ids, so a recording is stable. A stream that ends before its terminal event is parsed to what
arrived with no finish_reason, as a cut chat stream is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.boundary.responses_request import (
    ResponsesFormatError,
    compact_json,
    normalize_request,
)
from agentbench.errors import ModelError
from agentbench.runtime.models import (
    ChatResponse,
    TextDeltaHandler,
    ToolCall,
    Usage,
    estimate_usage,
)

RESPONSES_STREAM_OBJECT = "response.events"  # how a streamed response is kept in `raw`
# The terminal events of a stream that carry the whole response.
_TERMINAL = frozenset({"response.completed", "response.incomplete"})

__all__ = [
    "RESPONSES_STREAM_OBJECT",
    "ResponsesFormatError",
    "ResponsesStreamAccumulator",
    "normalize_request",
    "parse_response",
    "parse_sse",
    "parse_stream",
    "response_body",
    "sse_text",
    "stream_events",
]


# -- responses -------------------------------------------------------------------------------
@dataclass
class _Output:
    """What a response's output items say, gathered by output index as they arrive."""

    texts: dict[int, list[str]] = field(default_factory=dict)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    reasoning: dict[int, dict[int, list[str]]] = field(default_factory=dict)

    def add_item(self, index: int, item: Any) -> None:
        """A whole output item (a response's output, or a stream's `output_item.done`)."""
        if not isinstance(item, dict):
            raise ResponsesFormatError(f"output[{index}]: expected an output item (an object)")
        kind = item.get("type")
        if kind == "message":
            parts = item.get("content") or ()
            self.texts[index] = [
                p.get("text") or ""
                for p in parts
                if isinstance(p, dict) and p.get("type") == "output_text"
            ]
        elif kind == "function_call":
            self.calls[index] = {
                "name": item.get("name") or "",
                "arguments": item.get("arguments") or "",
                "id": item.get("call_id") or "",
            }
        elif kind == "reasoning":
            summary = [s for s in item.get("summary") or () if isinstance(s, dict)]
            self.reasoning[index] = {i: [s.get("text") or ""] for i, s in enumerate(summary)}

    def parse(
        self,
        body: dict[str, Any],
        request: dict[str, Any] | None,
        raw: dict[str, Any],
        finished: bool = True,
    ) -> ChatResponse:
        """The ChatResponse of these items, with `body`'s status, usage and model; one not
        `finished` (a stream cut short) has no finish_reason."""
        calls = [
            ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"] or f"call_stream_{i}")
            for i, c in sorted(self.calls.items())
        ]
        text = "".join("".join(t) for _, t in sorted(self.texts.items())) or None
        summaries = [
            "".join(s) for _, parts in sorted(self.reasoning.items()) for s in parts.values()
        ]
        reported = body.get("usage")
        if isinstance(reported, dict):
            usage = Usage(
                input_tokens=reported.get("input_tokens") or 0,
                output_tokens=reported.get("output_tokens") or 0,
            )
        elif request is not None:
            usage = estimate_usage(request, text, calls)
        else:
            usage = Usage()
        return ChatResponse(
            text=text,
            tool_calls=calls,
            finish_reason=_finish_reason(body, calls) if finished else None,
            usage=usage,
            model=body.get("model"),
            reasoning="\n\n".join(s for s in summaries if s) or None,
            raw=raw,
        )


def _finish_reason(body: dict[str, Any], calls: list[ToolCall]) -> str:
    if calls:
        return "tool_calls"
    if body.get("status") == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return "content_filter" if reason == "content_filter" else "length"
    return "stop"


def _failed(response: Any) -> ModelError:
    """The error a failed response (or a stream's `response.failed`) is reported as."""
    error = response.get("error") if isinstance(response, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    said = f"{code}: {message}" if code else message or "no error message"
    return ModelError(f"the model's response failed ({said})", body=compact_json(response))


def parse_response(body: dict[str, Any], request: dict[str, Any] | None = None) -> ChatResponse:
    """A Responses API `response` object as a ChatResponse (raw keeps the dict).

    Without a `usage` in the body, usage is estimated from `request` (the normalized request)
    when it is given. A response whose status is `failed` raises ModelError.
    """
    if not isinstance(body, dict) or not isinstance(body.get("output"), list):
        raise ResponsesFormatError("the response has no output list")
    if body.get("status") == "failed":
        raise _failed(body)
    output = _Output()
    for index, item in enumerate(body["output"]):
        output.add_item(index, item)
    return output.parse(body, request, body)


@dataclass
class ResponsesStreamAccumulator:
    """Builds one ChatResponse from a Responses stream's events as they arrive (the Responses
    counterpart of `completions.StreamAccumulator`, with the same `finished`/`cut_short`)."""

    on_text_delta: TextDeltaHandler | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    output: _Output = field(default_factory=_Output)
    final: dict[str, Any] | None = None  # the response of the terminal event
    model: str | None = None
    emitted: bool = False  # whether any text has reached the caller (a retry would repeat it)

    @property
    def finished(self) -> bool:
        """Whether the terminal event (`response.completed` or `.incomplete`) arrived: the
        server's word that the answer is whole."""
        return self.final is not None

    def cut_short(self) -> str | None:
        """What is wrong with a stream that ended before its terminal event, or None."""
        if self.finished:
            return None
        text = sum(len("".join(t)) for t in self.output.texts.values())
        got = [f"{text} characters of text"] if text else []
        got += [f"{len(self.output.calls)} unfinished tool call(s)"] if self.output.calls else []
        detail = ", ".join(got) if got else "no text" if self.events else "an empty event stream"
        return (
            f"the stream ended without response.completed after {len(self.events)} event(s) "
            f"({detail})"
        )

    def add(self, event: dict[str, Any]) -> None:
        if not isinstance(event, dict):
            raise ResponsesFormatError(f"event {len(self.events) + 1} is not an object")
        self.events.append(event)
        kind = event.get("type")
        if kind == "response.output_text.delta":
            delta = event.get("delta") or ""
            self.output.texts.setdefault(event.get("output_index", 0), []).append(delta)
            if delta and self.on_text_delta is not None:
                self.on_text_delta(delta)
                self.emitted = True
        elif kind == "response.function_call_arguments.delta":
            call = self.output.calls.get(event.get("output_index", 0))
            if call is not None:
                call["arguments"] += event.get("delta") or ""
        elif kind == "response.reasoning_summary_text.delta":
            summary = self.output.reasoning.setdefault(event.get("output_index", 0), {})
            summary.setdefault(event.get("summary_index", 0), []).append(event.get("delta") or "")
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._add_item(kind, event)
        elif kind in ("response.created", "response.in_progress"):
            self.model = self.model or (event.get("response") or {}).get("model")
        elif kind in _TERMINAL:
            self.final = _terminal_response(event)
        elif kind == "response.failed":
            raise _failed(event.get("response"))
        elif kind == "error":
            raise ModelError(
                f"the model's stream failed ({event.get('code') or 'error'}: "
                f"{event.get('message') or 'no error message'})",
                body=compact_json(event),
            )

    def _add_item(self, kind: str, event: dict[str, Any]) -> None:
        index, item = event.get("output_index", 0), event.get("item")
        if kind == "response.output_item.done" or not isinstance(item, dict):
            self.output.add_item(index, item)
        elif item.get("type") == "function_call":  # its arguments follow in deltas
            self.output.add_item(index, {**item, "arguments": ""})
        elif item.get("type") == "message":
            self.output.texts.setdefault(index, [])

    def response(self, request: dict[str, Any] | None = None) -> ChatResponse:
        """The whole response; usage is estimated from `request` if the stream reported none.
        Read from the terminal event's response when it has its output, else from the
        events; a stream cut before its end has no finish_reason."""
        raw = {"object": RESPONSES_STREAM_OBJECT, "events": self.events}
        final = self.final
        if final is None:
            return self.output.parse({"model": self.model}, request, raw, finished=False)
        output = self.output
        if final.get("output"):
            output = _Output()
            for index, item in enumerate(final["output"]):
                output.add_item(index, item)
        return output.parse({"model": self.model, **final}, request, raw)


def _terminal_response(event: dict[str, Any]) -> dict[str, Any]:
    response = event.get("response")
    if not isinstance(response, dict):
        raise ResponsesFormatError(f"{event.get('type')}: the event has no response object")
    return response


def parse_stream(
    events: Iterable[dict[str, Any]],
    on_text_delta: TextDeltaHandler | None = None,
    request: dict[str, Any] | None = None,
) -> ChatResponse:
    """A ChatResponse from a Responses stream's events (raw keeps them); usage estimated from
    `request` when none came. Text deltas reach `on_text_delta` as they are read."""
    accumulator = ResponsesStreamAccumulator(on_text_delta)
    for event in events:
        accumulator.add(event)
    return accumulator.response(request)


# -- writing responses -------------------------------------------------------------------------
def _item_ids(response_id: str) -> tuple[str, str]:
    """The ids of a response's message and reasoning items, from the response's own id."""
    stem = response_id.removeprefix("resp_")
    return f"msg_{stem}", f"rs_{stem}"


def _call_item_id(call_id: str) -> str:
    return f"fc_{call_id.removeprefix('call_')}"


def _output_items(response: ChatResponse, response_id: str) -> list[dict[str, Any]]:
    """The response's output items, whole: reasoning, then its text, then its tool calls."""
    message_id, reasoning_id = _item_ids(response_id)
    items: list[dict[str, Any]] = []
    if response.reasoning:
        summary = [{"type": "summary_text", "text": response.reasoning}]
        items.append({"id": reasoning_id, "type": "reasoning", "summary": summary})
    if response.text is not None:
        text = {"type": "output_text", "text": response.text, "annotations": [], "logprobs": []}
        items.append(
            {
                "id": message_id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    items.extend(
        {
            "id": _call_item_id(call.id),
            "type": "function_call",
            "status": "completed",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in response.tool_calls
    )
    return items


def _status(response: ChatResponse) -> tuple[str, dict[str, str] | None]:
    if response.finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if response.finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _envelope(
    response: ChatResponse,
    model: str,
    response_id: str,
    output: list[dict[str, Any]] | None,
    created_at: int,
) -> dict[str, Any]:
    """The `response` object; without `output`, as it is while being written (in_progress)."""
    status, incomplete = _status(response) if output is not None else ("in_progress", None)
    usage = None
    if output is not None:
        usage = {
            "input_tokens": response.usage.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": response.usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": response.usage.total_tokens,
        }
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "model": response.model or model,
        "output": output or [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


def response_body(response: ChatResponse, model: str, *, response_id: str) -> dict[str, Any]:
    """A Responses API `response` object for `response` (for a model without a body of its own)."""
    items = _output_items(response, response_id)
    return _envelope(response, model, response_id, items, int(time.time()))


def stream_events(
    response: ChatResponse, model: str, *, response_id: str, fragment_chars: int = 7
) -> list[dict[str, Any]]:
    """The events a Responses stream of `response` is made of, in order, numbered: text in
    words, tool-call arguments in `fragment_chars` pieces, the whole response at the end."""
    items = _output_items(response, response_id)
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    created_at = int(time.time())
    started = _envelope(response, model, response_id, None, created_at)
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(items):
        _item_events(emit, index, item, fragment_chars)
    final = _envelope(response, model, response_id, items, created_at)
    end = "response.completed" if final["status"] == "completed" else "response.incomplete"
    emit(end, response=final)
    return events


def _item_events(emit: Any, index: int, item: dict[str, Any], fragment_chars: int) -> None:
    """The events of one output item, from `output_item.added` to `output_item.done`."""
    where = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "message":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        part = item["content"][0]
        emit("response.content_part.added", **where, content_index=0, part={**part, "text": ""})
        words = part["text"].split(" ")
        for number, word in enumerate(words):
            delta = word if number == len(words) - 1 else word + " "
            emit("response.output_text.delta", **where, content_index=0, delta=delta, logprobs=[])
        emit("response.output_text.done", **where, content_index=0, text=part["text"], logprobs=[])
        emit("response.content_part.done", **where, content_index=0, part=part)
    elif kind == "function_call":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        arguments = item["arguments"]
        for start in range(0, len(arguments), fragment_chars):
            emit(
                "response.function_call_arguments.delta",
                **where,
                delta=arguments[start : start + fragment_chars],
            )
        emit(
            "response.function_call_arguments.done", **where, name=item["name"], arguments=arguments
        )
    else:  # reasoning: its summary in one piece
        emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        where["summary_index"] = 0
        summary = item["summary"][0]
        emit("response.reasoning_summary_part.added", **where, part={**summary, "text": ""})
        emit("response.reasoning_summary_text.delta", **where, delta=summary["text"])
        emit("response.reasoning_summary_text.done", **where, text=summary["text"])
        emit("response.reasoning_summary_part.done", **where, part=summary)
    emit("response.output_item.done", output_index=index, item=item)


# -- server-sent events ------------------------------------------------------------------------
def _read_json(text: str) -> Any:
    """`compact_json`'s reverse: orjson's parse, or Python's for a lone surrogate's escape."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def sse_text(events: Iterable[dict[str, Any]]) -> str:
    """Events as the server-sent-events body the Responses API sends (no `[DONE]` at the end)."""
    return "".join(
        f"event: {event.get('type')}\ndata: {compact_json(event)}\n\n"
        if isinstance(event.get("type"), str)
        else f"data: {compact_json(event)}\n\n"
        for event in events
    )


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The event dicts of a server-sent-events body (an event's `data:` lines joined, as the
    SSE standard says); raises ResponsesFormatError naming the line of one that is not JSON."""
    events: list[dict[str, Any]] = []
    data: list[str] = []
    first = 0
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if line.startswith("data:"):
            first = first or number
            data.append(line[6:] if line.startswith("data: ") else line[5:])
            continue
        if line or not data:
            continue  # `event:`, `id:`, a comment, or a blank line between events
        payload = "\n".join(data)
        data = []
        if payload == "[DONE]":
            break
        try:
            events.append(_read_json(payload))
        except ValueError as exc:
            raise ResponsesFormatError(f"event-stream line {first} is not JSON: {exc}") from None
        first = 0
    return events
