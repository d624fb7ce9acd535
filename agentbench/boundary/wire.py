"""The model APIs a boundary target may speak, each an adapter to one normalized request.

Chat Completions, the Responses API (the OpenAI Agents SDK's default) and Anthropic's Messages
API are told apart by the path the client posts to. Each adapter turns its request into the
chat-completions-shaped dict agentbench compares and records, renders an answer back in the
client's own format (JSON or an event stream), reads a live endpoint's answer, and writes an
error in the shape the client's SDK reads its message from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentbench.boundary import chat_api, messages_api
from agentbench.runtime.models import ChatResponse


@dataclass(frozen=True)
class Wire:
    """One model API at the boundary."""

    name: str  # "chat" | "responses" | "messages"
    path: str  # under the base URL, e.g. "/chat/completions"
    normalize: Callable[[dict[str, Any]], dict[str, Any]]
    # (response, model, body the client sent, call number) -> (content type, body)
    render: Callable[[ChatResponse, str, dict[str, Any], int], tuple[str, bytes]]
    # (content type, body, normalized request) -> the answer
    parse_answer: Callable[[str, bytes, dict[str, Any]], ChatResponse]
    # (message, type, code) -> an error body in this API's shape
    error: Callable[[str, str, str | None], bytes]


def _render_chat(
    response: ChatResponse, model: str, body: dict[str, Any], call: int
) -> tuple[str, bytes]:
    options = body.get("stream_options")
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    return chat_api.render(
        response, model, stream=bool(body.get("stream")), include_usage=include_usage
    )


def _normalize_responses(body: dict[str, Any]) -> dict[str, Any]:
    from agentbench.boundary import responses_api

    return responses_api.normalize_request(body)


def _render_responses(
    response: ChatResponse, model: str, body: dict[str, Any], call: int
) -> tuple[str, bytes]:
    import orjson

    from agentbench.boundary import responses_api

    raw = response.raw or {}
    if body.get("stream"):
        if raw.get("object") == responses_api.RESPONSES_STREAM_OBJECT:
            events = raw["events"]
        else:
            events = responses_api.stream_events(response, model, response_id=_response_id(call))
        return "text/event-stream", responses_api.sse_text(events).encode()
    if raw.get("object") == "response":
        return "application/json", orjson.dumps(raw)
    made = responses_api.response_body(response, model, response_id=_response_id(call))
    return "application/json", orjson.dumps(made)


def _response_id(call: int) -> str:
    # Stable from run to run, so a framework that keeps response ids sees the same ones.
    return f"resp_agentbench_{call:06d}"


def _parse_responses(content_type: str, body: bytes, request: dict[str, Any]) -> ChatResponse:
    import orjson

    from agentbench.boundary import responses_api

    if content_type.startswith("text/event-stream"):
        events = responses_api.parse_sse(body.decode("utf-8", errors="replace"))
        return responses_api.parse_stream(events, None, request)
    return responses_api.parse_response(orjson.loads(body), request)


def _render_messages(
    response: ChatResponse, model: str, body: dict[str, Any], call: int
) -> tuple[str, bytes]:
    import orjson

    raw = response.raw or {}
    if body.get("stream") and raw.get("object") == messages_api.MESSAGES_STREAM_OBJECT:
        return "text/event-stream", messages_api.sse_text(raw["events"]).encode()
    if raw.get("type") == "message":
        message = raw
    else:
        message = messages_api.message_body(response, model, message_id=_message_id(raw, call))
    if body.get("stream"):
        return "text/event-stream", messages_api.sse_text(
            messages_api.stream_events(message)
        ).encode()
    return "application/json", orjson.dumps(message)


def _message_id(raw: dict[str, Any], call: int) -> str:
    """A recorded stream's own message id, else one stable from run to run."""
    for event in raw.get("events") or ():
        if isinstance(event, dict) and event.get("type") == "message_start":
            recorded = (event.get("message") or {}).get("id")
            if isinstance(recorded, str):
                return recorded
    return f"msg_agentbench_{call:06d}"


CHAT = Wire(
    "chat",
    chat_api.PATH,
    chat_api.normalize_request,
    _render_chat,
    chat_api.parse_answer,
    chat_api.error_body,
)
RESPONSES = Wire(
    "responses",
    "/responses",
    _normalize_responses,
    _render_responses,
    _parse_responses,
    chat_api.error_body,
)
MESSAGES = Wire(
    "messages",
    messages_api.PATH,
    messages_api.normalize_request,
    _render_messages,
    messages_api.parse_answer,
    messages_api.error_body,
)
WIRES = (CHAT, RESPONSES, MESSAGES)


def wire_for(path: str) -> Wire | None:
    """The API a request path (after the base URL's own path) belongs to, or None.

    Anthropic's is `/v1/messages` (or `/messages` under a base URL that ends in `/v1`), never
    another path ending in `messages`, such as OpenAI's `/v1/threads/{id}/messages`."""
    path = path.split("?", 1)[0].rstrip("/")
    if path == MESSAGES.path or path.endswith("/v1" + MESSAGES.path):
        return MESSAGES
    for wire in (CHAT, RESPONSES):
        if path.endswith(wire.path):
            return wire
    return None
