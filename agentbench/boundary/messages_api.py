"""The Anthropic Messages API (`POST /v1/messages`) as agentbench's one request and response shape.

A request becomes the chat-completions-shaped dict agentbench compares (`normalize_request`,
from `messages_request`). An answer — a `message` object, or its event stream
(`message_start`, `content_block_start` / `_delta` / `_stop` per block, `message_delta` with
the stop reason and usage, `message_stop`) — becomes the `ChatResponse` a chat completion does,
the body or the events kept in `raw` so a replay serves what was recorded, verbatim. The other
way, a `ChatResponse` is written as a `message` (text, then one `tool_use` block per tool call:
several for parallel tool use) or as its stream of events with `event:` lines, as Anthropic
sends them. Stop reasons map to chat's finish reasons and back (`end_turn` stop, `tool_use`
tool_calls, `max_tokens` length, `refusal` content_filter); usage is `input_tokens` (cache
reads and writes included: they are input the call was billed for) and `output_tokens`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.boundary.messages_request import MessagesFormatError, normalize_request
from agentbench.boundary.responses_api import parse_sse
from agentbench.errors import ModelError
from agentbench.runtime.models import ChatResponse, ToolCall, Usage, estimate_usage

PATH = "/messages"
MESSAGES_STREAM_OBJECT = "message.events"  # how a streamed message is kept in `raw`

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

__all__ = [
    "MESSAGES_STREAM_OBJECT",
    "PATH",
    "MessagesFormatError",
    "error_body",
    "message_body",
    "normalize_request",
    "parse_answer",
    "parse_message",
    "parse_stream",
    "sse_text",
    "stream_events",
]


# -- reading answers ---------------------------------------------------------------------------
def _usage(reported: Any) -> Usage:
    if not isinstance(reported, dict):
        return Usage()
    cached = (reported.get("cache_read_input_tokens") or 0) + (
        reported.get("cache_creation_input_tokens") or 0
    )
    return Usage(
        input_tokens=(reported.get("input_tokens") or 0) + cached,
        output_tokens=reported.get("output_tokens") or 0,
    )


def _error(body: Any) -> ModelError:
    """The error an `error` body (or a stream's `error` event) is reported as."""
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return ModelError(
        f"the model answered an error ({kind or 'error'}: {message or 'no error message'})",
        body=orjson.dumps(body).decode(),
    )


def _response(
    blocks: list[dict[str, Any]],
    stop_reason: str | None,
    usage: Usage | None,
    model: Any,
    request: dict[str, Any] | None,
    raw: dict[str, Any],
) -> ChatResponse:
    texts = [b.get("text") or "" for b in blocks if b.get("type") == "text"]
    thoughts = [b.get("thinking") or "" for b in blocks if b.get("type") == "thinking"]
    calls = [
        ToolCall(
            name=b.get("name") or "",
            arguments=b["input"] if isinstance(b.get("input"), str) else _dumps(b.get("input")),
            id=b.get("id") or f"toolu_stream_{i}",
        )
        for i, b in enumerate(blocks)
        if b.get("type") == "tool_use"
    ]
    text = "".join(texts) if texts else None
    if usage is None:
        usage = estimate_usage(request, text, calls) if request is not None else Usage()
    return ChatResponse(
        text=text,
        tool_calls=calls,
        finish_reason=None if stop_reason is None else _FINISH.get(stop_reason, stop_reason),
        usage=usage,
        model=model if isinstance(model, str) else None,
        reasoning="\n\n".join(t for t in thoughts if t) or None,
        raw=raw,
    )


def _dumps(value: Any) -> str:
    return orjson.dumps({} if value is None else value).decode()


def parse_message(body: dict[str, Any], request: dict[str, Any] | None = None) -> ChatResponse:
    """A Messages API `message` object as a ChatResponse (raw keeps the dict); an `error`
    body raises ModelError. Without `usage`, usage is estimated from `request` if given."""
    if isinstance(body, dict) and body.get("type") == "error":
        raise _error(body)
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        raise MessagesFormatError("the answer is not a message: it has no content list")
    blocks = [b for b in body["content"] if isinstance(b, dict)]
    usage = _usage(body["usage"]) if isinstance(body.get("usage"), dict) else None
    return _response(blocks, body.get("stop_reason"), usage, body.get("model"), request, body)


@dataclass
class _Stream:
    """A Messages stream's events gathered into the message they build."""

    events: list[dict[str, Any]] = field(default_factory=list)
    message: dict[str, Any] = field(default_factory=dict)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    stopped: bool = False

    def add(self, event: Any) -> None:
        if not isinstance(event, dict):
            raise MessagesFormatError(f"event {len(self.events) + 1} is not an object")
        self.events.append(event)
        kind = event.get("type")
        if kind == "message_start":
            self.message = event.get("message") or {}
            self.usage.update(self.message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            self.blocks[event.get("index", 0)] = block
        elif kind == "content_block_delta":
            self._delta(event.get("index", 0), event.get("delta") or {})
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self.usage.update(
                {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            )
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            raise _error(event)

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = (block.get("text") or "") + (delta.get("text") or "")
        elif kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(delta.get("partial_json") or "")
        elif kind == "thinking_delta":
            block["thinking"] = (block.get("thinking") or "") + (delta.get("thinking") or "")

    def response(self, request: dict[str, Any] | None) -> ChatResponse:
        blocks = []
        for index, block in sorted(self.blocks.items()):
            if index in self.partial_json:
                # The arguments as streamed: a stream cut mid-call keeps what arrived.
                block = {**block, "input": "".join(self.partial_json[index]) or "{}"}
            blocks.append(block)
        raw = {"object": MESSAGES_STREAM_OBJECT, "events": self.events}
        usage = _usage(self.usage) if self.usage else None
        stop = self.stop_reason if self.stopped else None  # cut short: not the model's word
        return _response(blocks, stop, usage, self.message.get("model"), request, raw)


def parse_stream(
    events: Iterable[dict[str, Any]], request: dict[str, Any] | None = None
) -> ChatResponse:
    """A ChatResponse from a Messages stream's events (raw keeps them); a stream that ends
    before `message_stop` has no finish_reason; an `error` event raises ModelError."""
    stream = _Stream()
    for event in events:
        stream.add(event)
    return stream.response(request)


def parse_answer(content_type: str, body: bytes, request: dict[str, Any]) -> ChatResponse:
    """A live endpoint's answer (JSON or an event stream) as a ChatResponse, raw kept."""
    if content_type.startswith("text/event-stream"):
        return parse_stream(parse_sse(body.decode("utf-8", errors="replace")), request)
    return parse_message(orjson.loads(body), request)


# -- writing answers ---------------------------------------------------------------------------
def _input(arguments: str) -> Any:
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        value = None
    # A tool_use input is an object: arguments that are not one are kept as their text, so the
    # client sees what the model said rather than nothing.
    return value if isinstance(value, dict) else {"arguments": arguments}


def message_body(response: ChatResponse, model: str, *, message_id: str) -> dict[str, Any]:
    """A Messages API `message` object for `response`."""
    content: list[dict[str, Any]] = []
    if response.reasoning:
        content.append({"type": "thinking", "thinking": response.reasoning, "signature": ""})
    if response.text:
        content.append({"type": "text", "text": response.text})
    content.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)}
        for c in response.tool_calls
    )
    finish = response.finish_reason or ("tool_calls" if response.tool_calls else "stop")
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": response.model or model,
        "content": content,
        "stop_reason": _STOP.get(finish, finish),
        "stop_sequence": None,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    }


def stream_events(message: dict[str, Any], *, fragment_chars: int = 7) -> list[dict[str, Any]]:
    """The events a Messages stream of `message` (a `message` object) is made of, in order:
    text in words, tool inputs as JSON in `fragment_chars` pieces, as Anthropic streams them."""
    usage = message.get("usage") or {}
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 0},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message.get("content") or ()):
        events.extend(_block_events(index, block, fragment_chars))
    delta = {
        "stop_reason": message.get("stop_reason"),
        "stop_sequence": message.get("stop_sequence"),
    }
    events.append(
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _block_events(index: int, block: dict[str, Any], fragment_chars: int) -> list[dict[str, Any]]:
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        started = {**block, "text": ""}
        words = (block.get("text") or "").split(" ")
        deltas = [
            {"type": "text_delta", "text": w if n == len(words) - 1 else w + " "}
            for n, w in enumerate(words)
        ]
    elif kind == "tool_use":
        started = {**block, "input": {}}
        text = _dumps(block.get("input"))
        deltas = [
            {"type": "input_json_delta", "partial_json": text[i : i + fragment_chars]}
            for i in range(0, len(text), fragment_chars)
        ]
    elif kind == "thinking":
        started = {**block, "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking") or ""}]
        deltas.append({"type": "signature_delta", "signature": block.get("signature") or ""})
    else:
        started = block
    return [
        {"type": "content_block_start", "index": index, "content_block": started},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def sse_text(events: Iterable[dict[str, Any]]) -> str:
    """Events as the server-sent-events body Anthropic sends: an `event:` line naming each."""
    return "".join(
        f"event: {event.get('type')}\ndata: {orjson.dumps(event).decode()}\n\n" for event in events
    )


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> bytes:
    """An error in Anthropic's shape, which its SDKs raise with `message` (`code` has no place
    in it: Anthropic's errors are told apart by `type`)."""
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
