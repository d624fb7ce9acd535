"""The OpenAI Chat Completions API at the boundary: requests normalized, answers rendered.

A chat request is already the shape agentbench compares, so normalizing it only takes out
what says how to deliver the answer rather than what is asked (`stream`, `stream_options`: the
same agent may stream in one code path and not in another) and re-dumps the tool-call
arguments the agent sends back as compact JSON: frameworks parse the model's arguments and
serialize them again (LangGraph, pydantic-ai), and spacing is not behaviour. An assistant
message's empty extras (`refusal: null`, `annotations: []`, `audio: null`, `function_call:
null`) are left out: the openai SDK echoes whatever fields the provider's answer had, so the
same agent sends them to OpenAI and not to another server, and an imported trace never has them.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

from agentbench.runtime.completions import (
    STREAM_OBJECT,
    completion_body,
    parse_completion,
    parse_sse,
    parse_stream,
    sse_text,
    stream_chunks,
)
from agentbench.runtime.models import ChatResponse

PATH = "/chat/completions"
# Keys that choose how the answer is delivered, not what is asked.
TRANSPORT_KEYS = ("stream", "stream_options")


def normalize_request(body: dict[str, Any]) -> dict[str, Any]:
    """The request as agentbench compares it (see the module docstring)."""
    normalized = {k: v for k, v in body.items() if k not in TRANSPORT_KEYS}
    messages = normalized.get("messages")
    if isinstance(messages, list):
        normalized["messages"] = [_message(m) for m in messages]
    return normalized


# An assistant message's fields that say nothing when empty (see the module docstring).
EMPTY_EXTRAS = frozenset({"refusal", "annotations", "audio", "function_call"})


def _message(message: Any) -> Any:
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return message
    if not EMPTY_EXTRAS.isdisjoint(message):
        message = {k: v for k, v in message.items() if k not in EMPTY_EXTRAS or v}
    calls = message.get("tool_calls")
    if not calls or not isinstance(calls, list):
        return message
    return {**message, "tool_calls": [_call(c) for c in calls]}


def _call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    if not isinstance(arguments, str):
        return call
    compact = compact_json(arguments)
    if compact == arguments:
        return call
    return {**call, "function": {**function, "arguments": compact}}  # type: ignore[dict-item]


# Every request carries the whole conversation again, so the same arguments are compacted at
# every later call of a session: short ones are remembered (a bounded few; long ones, rarer,
# are compacted again rather than held).
_REMEMBERED_CHARS = 4096


def compact_json(text: str) -> str:
    """JSON text re-dumped compactly, keys in their order; text that is not JSON as it is."""
    if len(text) <= _REMEMBERED_CHARS:
        return _remembered_compact(text)
    return _compact(text)


def _compact(text: str) -> str:
    try:
        return orjson.dumps(orjson.loads(text)).decode()
    except orjson.JSONDecodeError:
        return text


_remembered_compact = functools.lru_cache(maxsize=2048)(_compact)


def render(
    response: ChatResponse, model: str, *, stream: bool, include_usage: bool
) -> tuple[str, bytes]:
    """The answer as the client asked for it: (content type, body). A recorded body of the
    same kind is served as it was recorded (its ids, its chunking)."""
    raw = response.raw
    if stream:
        if raw is not None and raw.get("object") == STREAM_OBJECT:
            chunks = raw["chunks"]
        else:
            chunks = list(stream_chunks(response, model, include_usage=include_usage))
        return "text/event-stream", sse_text(chunks).encode()
    if raw is not None and raw.get("object") == "chat.completion":
        return "application/json", orjson.dumps(raw)
    return "application/json", orjson.dumps(completion_body(response, model))


def parse_answer(content_type: str, body: bytes, request: dict[str, Any]) -> ChatResponse:
    """A live endpoint's answer (JSON or an event stream) as a ChatResponse, raw kept."""
    text = body.decode("utf-8", errors="replace")
    if content_type.startswith("text/event-stream"):
        return parse_stream(parse_sse(text), None, request)
    return parse_completion(orjson.loads(body), request)


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> bytes:
    """An error in OpenAI's shape, so every client library shows its message (the loopback
    server answers a request no wire reads with one too)."""
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})
