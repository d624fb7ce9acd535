"""Chat-completion bodies as plain dicts: parse them, build them, stream them.

One parser for every path a response can take — live through the openai SDK, replayed from a
cassette, served by the local test server — so a replayed response becomes exactly the
`ChatResponse` the live one did. Streams are lists of `chat.completion.chunk` dicts; tool-call
fragments are accumulated by index into whole calls. Given the request, a body or stream that
reports no usage gets an estimate, marked `Usage.estimated`, instead of zero tokens.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.runtime.models import (
    ChatResponse,
    TextDeltaHandler,
    ToolCall,
    Usage,
    estimate_usage,
)
from agentbench.runtime.records import maker

STREAM_OBJECT = "chat.completion.chunks"  # how a streamed response is kept in `raw`


class CompletionFormatError(ValueError):
    """A body that is not a chat completion (or chunk); the message says what is missing."""


# `records.built` for the records every parsed response makes, each always from the same
# fields: the makers looked up once.
_make_usage = maker(Usage, ("input_tokens", "output_tokens"))
_make_tool_call = maker(ToolCall, ("name", "arguments", "id"))
_make_response = maker(
    ChatResponse, ("text", "tool_calls", "finish_reason", "usage", "model", "reasoning", "raw")
)


def usage_from(body: dict[str, Any] | None) -> Usage:
    if not body:
        return Usage()
    fields = {
        "input_tokens": body.get("prompt_tokens") or 0,
        "output_tokens": body.get("completion_tokens") or 0,
    }
    if type(fields["input_tokens"]) is int and type(fields["output_tokens"]) is int:
        return _make_usage(fields)
    return Usage(**fields)  # validation converts (10.0) or says what is wrong


_TEXT_TYPES = frozenset({str, type(None)})  # a response's texts, when they need no checking


def _tool_call(name: Any, arguments: Any, call_id: Any) -> ToolCall:
    fields = {"name": name, "arguments": arguments, "id": call_id}
    if type(name) is str and type(arguments) is str and type(call_id) is str:
        return _make_tool_call(fields)  # one a step of a replay: see `records.built`
    return ToolCall(**fields)  # validation converts (arguments as an object) or refuses


def parse_completion(body: dict[str, Any], request: dict[str, Any] | None = None) -> ChatResponse:
    """A `chat.completion` dict as a ChatResponse (raw keeps the dict).

    Without a `usage` in the body, usage is estimated from `request` when it is given.
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices:
        raise CompletionFormatError("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise CompletionFormatError("choices[0] has no message")
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function")
        if not function:
            continue
        calls.append(
            _tool_call(
                function.get("name") or "", function.get("arguments") or "", call.get("id") or ""
            )
        )
    text = message.get("content")
    reported = body.get("usage")
    fields = {
        "text": text,
        "tool_calls": calls,
        "finish_reason": choice.get("finish_reason"),
        "usage": usage_from(reported)
        if reported or request is None
        else estimate_usage(request, text, calls),
        "model": body.get("model"),
        "reasoning": message.get("reasoning_content"),
        "raw": body,
    }
    texts = (text, fields["finish_reason"], fields["model"], fields["reasoning"])
    if set(map(type, texts)) <= _TEXT_TYPES:  # all str or None, checked without a call each
        # Shares `body` as `raw`: parsed for this response alone (validation would copy it).
        return _make_response(fields)
    return ChatResponse(**fields)  # validation says what is wrong


@dataclass
class StreamAccumulator:
    """Builds one ChatResponse from `chat.completion.chunk` dicts as they arrive."""

    on_text_delta: TextDeltaHandler | None = None
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    usage_reported: bool = False
    model: str | None = None
    chunks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def emitted(self) -> bool:
        """Whether any text has reached the caller (a retry would then duplicate it)."""
        return bool(self.text) and self.on_text_delta is not None

    @property
    def finished(self) -> bool:
        """Whether a finish_reason arrived: the model's own word that its answer is whole.

        It is the one end-of-answer signal a client can rely on. Usage may follow it or not
        (llama.cpp sometimes omits it), and the openai SDK consumes `data: [DONE]` without
        reporting it, so a stream that ends cleanly looks the same with or without [DONE].
        """
        return self.finish_reason is not None

    def cut_short(self) -> str | None:
        """What is wrong with a stream that ended without a finish_reason, or None if finished."""
        if self.finished:
            return None
        got = [f"{len(''.join(self.text))} characters of text"] if self.text else []
        got += [f"{len(self.calls)} unfinished tool call(s)"] if self.calls else []
        detail = ", ".join(got) if got else "no text" if self.chunks else "an empty event stream"
        return (
            f"the stream ended without a finish_reason after {len(self.chunks)} chunk(s) ({detail})"
        )

    def add(self, chunk: dict[str, Any]) -> None:
        self.chunks.append(chunk)
        self.model = self.model or chunk.get("model")
        if chunk.get("usage"):
            self.usage = usage_from(chunk["usage"])
            self.usage_reported = True
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
                if self.on_text_delta is not None:
                    self.on_text_delta(delta["content"])
            if delta.get("reasoning_content"):
                self.reasoning.append(delta["reasoning_content"])
            for fragment in delta.get("tool_calls") or ():
                self._add_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _add_fragment(self, fragment: dict[str, Any]) -> None:
        # Fragments of one call share an index; arguments arrive in pieces. The name usually
        # arrives once, but llama.cpp repeats it in every chunk and some providers send it
        # cumulatively: a name equal to or extending the one so far replaces it; only a
        # different piece is a continuation (a provider splitting the name).
        call = self.calls.setdefault(
            fragment.get("index") or 0, {"id": "", "name": "", "arguments": ""}
        )
        if fragment.get("id"):
            call["id"] = fragment["id"]
        function = fragment.get("function") or {}
        name = function.get("name")
        if name:
            call["name"] = name if name.startswith(call["name"]) else call["name"] + name
        if function.get("arguments"):
            call["arguments"] += function["arguments"]

    def response(self, request: dict[str, Any] | None = None) -> ChatResponse:
        """The whole response; usage is estimated from `request` if the stream reported none."""
        calls = [
            ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"] or f"call_stream_{i}")
            for i, c in sorted(self.calls.items())
        ]
        text = "".join(self.text) or None
        usage = self.usage
        if not self.usage_reported and request is not None:
            usage = estimate_usage(request, text, calls)
        return ChatResponse(
            text=text,
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=usage,
            model=self.model,
            reasoning="".join(self.reasoning) or None,
            raw={"object": STREAM_OBJECT, "chunks": self.chunks},
        )


def parse_stream(
    chunks: Iterable[dict[str, Any]],
    on_text_delta: TextDeltaHandler | None = None,
    request: dict[str, Any] | None = None,
) -> ChatResponse:
    """A ChatResponse from a stream's chunks; usage estimated from `request` when none came."""
    accumulator = StreamAccumulator(on_text_delta)
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.response(request)


def completion_body(response: ChatResponse, model: str) -> dict[str, Any]:
    """A `chat.completion` dict for `response` (for models that produce no body of their own)."""
    message: dict[str, Any] = {"role": "assistant", "content": response.text}
    if response.tool_calls:
        message["tool_calls"] = [call.as_openai() for call in response.tool_calls]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": response.model or model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": response.finish_reason
                or ("tool_calls" if response.tool_calls else "stop"),
            }
        ],
        "usage": usage_body(response.usage),
    }


def usage_body(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def stream_chunks(
    response: ChatResponse, model: str, fragment_chars: int = 7, include_usage: bool = True
) -> Iterator[dict[str, Any]]:
    """`chat.completion.chunk` dicts for `response`, arguments split into fragments."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": response.model or model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if response.text:
        words = response.text.split(" ")
        for i, word in enumerate(words):
            yield chunk({"content": word if i == len(words) - 1 else word + " "})
    for index, call in enumerate(response.tool_calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        pieces = [
            call.arguments[i : i + fragment_chars]
            for i in range(0, len(call.arguments), fragment_chars)
        ]
        for piece in pieces:
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    finish = response.finish_reason or ("tool_calls" if response.tool_calls else "stop")
    yield chunk({}, finish)
    if include_usage:
        yield {**base, "choices": [], "usage": usage_body(response.usage)}


def sse_text(chunks: Iterable[dict[str, Any]]) -> str:
    """Chunks as the server-sent-events body a provider sends."""
    lines = [f"data: {orjson.dumps(chunk).decode()}\n\n" for chunk in chunks]
    return "".join(lines) + "data: [DONE]\n\n"


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The chunk dicts of a server-sent-events body; raises CompletionFormatError if garbled."""
    chunks: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            chunks.append(orjson.loads(payload))
        except orjson.JSONDecodeError as exc:
            raise CompletionFormatError(f"event-stream line {number} is not JSON: {exc}") from None
    return chunks
