"""OpenAI chat messages to and from the GenAI semantic conventions' message parts.

The conventions (`gen_ai.input.messages` / `gen_ai.output.messages`, latest experimental)
describe a message as a role and a list of typed parts: `text`, `tool_call`,
`tool_call_response`, `reasoning`, `uri` and `blob`. agentbench speaks the OpenAI chat shape,
so spans going out are converted to parts and spans coming in are converted back.

Tool definitions (`gen_ai.tool.definitions`) go out in the conventions' flat shape, one
`{"type": "function", "name", "description", "parameters"}` a tool, where OpenAI's chat request
nests the function (`{"type": "function", "function": {...}}`); both shapes are read back.

Tool-call arguments are the one field whose text matters to a replay (the runtime sends the
model's own argument text back in the next request): they go out as a JSON object when that
object, serialized the way the runtime serializes arguments (`json.dumps(..,
ensure_ascii=False)`), gives back the very same text, and as the text otherwise, so a round
trip keeps them byte for byte. Arguments arriving as an object from another instrumentation
are serialized that same way.
"""

from __future__ import annotations

import json
from typing import Any

from agentbench.runtime.models import ChatResponse, ToolCall


class ContentError(ValueError):
    """A message in a span's content that does not have the shape the conventions give."""


def arguments_out(text: str) -> Any:
    """Tool-call arguments for a span: the object when that round-trips exactly, else text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict) and json.dumps(value, ensure_ascii=False) == text:
        return value
    return text


def arguments_in(value: Any) -> str:
    """Tool-call arguments from a span, as the raw text the runtime keeps."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _text(content: Any) -> str:
    """A tool message's or a response's content as text (structured content as JSON)."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


# -- out: OpenAI chat → GenAI parts ------------------------------------------------------------
def _content_parts(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else [content]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "text", "content": part.get("text", "")})
        elif kind == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            parts.append({"type": "uri", "modality": "image", "uri": url})
        else:  # kept whole, so nothing is lost; the conventions allow custom part types
            parts.append({"type": "openai", "content": part})
    return parts


def to_parts(message: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI chat message as a GenAI input message."""
    role = message.get("role", "user")
    if role == "tool":
        response = {
            "type": "tool_call_response",
            "id": message.get("tool_call_id"),
            "response": message.get("content"),
        }
        if message.get("is_error"):  # Anthropic's tool_result is_error: the tool failed
            response["is_error"] = True
        parts = [response]
    else:
        parts = _content_parts(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": arguments_out(function.get("arguments") or ""),
                }
            )
    out: dict[str, Any] = {"role": role, "parts": parts}
    if message.get("name"):
        out["name"] = message["name"]
    if role == "assistant" and message.get("content") == "" and message.get("tool_calls"):
        out["parts"].insert(0, {"type": "text", "content": ""})  # keep content "" (not null)
    return out


def output_message(response: ChatResponse) -> dict[str, Any]:
    """A model response as the one GenAI output message (with its finish reason)."""
    parts: list[dict[str, Any]] = []
    if response.reasoning:
        parts.append({"type": "reasoning", "content": response.reasoning})
    if response.text is not None:
        parts.append({"type": "text", "content": response.text})
    for call in response.tool_calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": arguments_out(call.arguments),
            }
        )
    return {"role": "assistant", "parts": parts, "finish_reason": response.finish_reason or "stop"}


def tool_definitions_out(tools: list[Any]) -> list[Any]:
    """A request's tool definitions in the conventions' flat shape (`type`, `name`,
    `description`, `parameters` side by side): OpenAI's `{"type": t, t: {...}}` entries are
    flattened, in their keys' order; an entry of another shape is kept as it is."""
    flat: list[Any] = []
    for item in tools:
        kind = item.get("type") if isinstance(item, dict) else None
        inner = item.get(kind) if isinstance(kind, str) else None
        if isinstance(inner, dict) and len(item) == 2 and "type" not in inner:
            flat.append({"type": kind, **inner})
        else:
            flat.append(item)
    return flat


# -- in: GenAI parts → OpenAI chat --------------------------------------------------------------
def _where(index: int, field: str) -> str:
    return f"message {index}: {field}"


def _read_parts(
    parts: list[Any], index: int
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """A message's texts, its content as OpenAI parts, and its tool calls."""
    texts: list[str] = []
    rich: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for number, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(part.get("content") or "")
            rich.append({"type": "text", "text": part.get("content") or ""})
        elif kind == "tool_call":
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {
                        "name": part.get("name"),
                        "arguments": arguments_in(part.get("arguments")),
                    },
                }
            )
        elif kind == "uri":
            rich.append({"type": "image_url", "image_url": {"url": part.get("uri", "")}})
        elif kind == "openai" and isinstance(part.get("content"), dict):
            rich.append(part["content"])
        elif kind == "reasoning":
            continue  # not part of what is sent back to a chat-completions model
        else:
            raise ContentError(
                f"{_where(index, f'parts[{number}].type')}: {kind!r} is not a part agentbench "
                "can replay (text, tool_call, tool_call_response, uri)"
            )
    return texts, rich, calls


def from_parts(message: Any, index: int) -> dict[str, Any]:
    """One GenAI input message back as an OpenAI chat message; ContentError names the part."""
    if not isinstance(message, dict) or "role" not in message:
        raise ContentError(f"{_where(index, 'role')}: expected an object with a role")
    role = message["role"]
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise ContentError(f"{_where(index, 'parts')}: expected a list of parts")
    if role == "tool":
        responses = [
            p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call_response"
        ]
        if len(responses) != 1:
            raise ContentError(
                f"{_where(index, 'parts')}: a tool message needs one tool_call_response part, "
                f"found {len(responses)}"
            )
        tool = {
            "role": "tool",
            "tool_call_id": responses[0].get("id"),
            "content": _text(responses[0].get("response")),
        }
        if responses[0].get("is_error") is True:
            tool["is_error"] = True
        return tool
    texts, rich, calls = _read_parts(parts, index)
    out: dict[str, Any] = {"role": role}
    plain = len(rich) == len(texts)
    if not parts:
        out["content"] = None if role == "assistant" else ""
    elif plain:
        out["content"] = "".join(texts) if texts else (None if calls else "")
    else:
        out["content"] = rich
    if calls:
        out["tool_calls"] = calls
    if message.get("name"):
        out["name"] = message["name"]
    return out


# The fields of OpenAI's function object: what a flat definition from elsewhere keeps.
_FUNCTION_FIELDS = ("name", "description", "parameters", "strict")


def tool_definitions_in(value: Any, *, whole: bool = False) -> list[dict[str, Any]]:
    """Tool definitions from a span, in OpenAI's chat shape: the conventions' flat entries
    (agentbench's own, and other instrumentations') nested again, OpenAI's nested entries (what
    agentbench wrote before) kept. `whole` keeps every field of a flat entry (agentbench's own
    spans, which hold the request whole); otherwise a function keeps the fields OpenAI knows,
    less those recorded as null."""
    tools: list[dict[str, Any]] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if (isinstance(kind, str) and isinstance(item.get(kind), dict)) or (
            kind is None and isinstance(item.get("function"), dict)
        ):
            tools.append(item)  # OpenAI's nested shape
        elif "name" in item:
            kind = kind if isinstance(kind, str) and kind else "function"
            inner = {
                key: field
                for key, field in item.items()
                if key != "type"
                and (whole or kind != "function" or (key in _FUNCTION_FIELDS and field is not None))
            }
            tools.append({"type": kind, kind: inner})
    return tools


def response_from_output(
    messages: Any, finish_reasons: list[str] | None = None
) -> tuple[str | None, list[ToolCall], str | None, str | None]:
    """(text, tool calls, finish reason, reasoning) of a span's `gen_ai.output.messages`."""
    if not isinstance(messages, list) or not messages:
        raise ContentError("output: expected a list with the model's message")
    message = messages[0]
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise ContentError("output message 0: expected an object with a list of parts")
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for part in message["parts"]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(part.get("content") or "")
        elif kind == "reasoning":
            reasoning.append(part.get("content") or "")
        elif kind == "tool_call":
            call: dict[str, Any] = {
                "name": part.get("name") or "",
                "arguments": arguments_in(part.get("arguments")),
            }
            if part.get("id"):
                call["id"] = part["id"]
            calls.append(ToolCall(**call))
    finish = message.get("finish_reason") or (finish_reasons[0] if finish_reasons else None)
    text = "".join(texts) if texts else None
    return text, calls, finish, "".join(reasoning) if reasoning else None
