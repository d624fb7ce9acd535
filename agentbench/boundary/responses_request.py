"""Responses API requests, normalized to the chat-completions shape agentbench compares.

`instructions` becomes a first system message and `input` (text or items) the messages after
it: message items keep their role, their text parts joined, images and files in chat's part
shape; a model's function calls join one assistant message's `tool_calls` (their arguments
re-dumped compactly, as frameworks re-serialize them); their outputs are `tool` messages.
Function tools and `tool_choice` take chat's shape; every other setting keeps its name, and the
transport's own keys (`stream`, `stream_options`) are dropped.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from agentbench.runtime.completions import CompletionFormatError

# Keys a request's normalization maps itself; every other key is a setting, kept by its name,
# except the transport's own (`stream`, `stream_options`), which say how, not what, to answer.
_MAPPED = frozenset({"model", "instructions", "input", "tools", "tool_choice"})
_TRANSPORT = frozenset({"stream", "stream_options"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


class ResponsesFormatError(CompletionFormatError):
    """A Responses API request, response or event agentbench cannot read; says where."""


def normalize_request(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request body as the chat-completions-shaped request agentbench compares.

    `instructions` is a first system message, `input` (text or items) the messages after it,
    function tools and `tool_choice` are in chat's shape; other settings keep their names and
    the transport's keys (`stream`, `stream_options`) are dropped. The body is not changed.
    """
    if not isinstance(body, dict):
        raise ResponsesFormatError(f"the request body is {type(body).__name__}, not an object")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        messages.append({"role": "system", "content": instructions})
    elif isinstance(instructions, list):  # the API also takes input items here
        messages.extend(_messages(instructions, "instructions"))
    elif instructions is not None:
        raise ResponsesFormatError("instructions: expected text or a list of input items")
    given = body.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        messages.extend(_messages(given, "input"))
    elif given is not None:
        raise ResponsesFormatError("input: expected text or a list of input items")
    request: dict[str, Any] = {"model": body["model"]} if "model" in body else {}
    request["messages"] = messages
    if "tools" in body:
        tools = body["tools"]
        request["tools"] = [_tool(t) for t in tools] if isinstance(tools, list) else tools
    if "tool_choice" in body:
        request["tool_choice"] = _tool_choice(body["tool_choice"])
    for key, value in body.items():
        if key not in _MAPPED and key not in _TRANSPORT:
            request[key] = value
    return request


def _messages(items: list[Any], where: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise ResponsesFormatError(f"{at}: expected an input item (an object)")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, at))
        elif kind == "function_call":
            _add_call(messages, item, at)
        elif kind == "function_call_output":
            messages.append(_tool_result(item, at))
        elif kind == "reasoning":
            # The model's own reasoning handed back for the provider to continue from (its
            # summary, often encrypted content that differs every call): it is the previous
            # answer echoed, not something the agent chose, and chat has no place for it.
            continue
        else:  # hosted tools' items (web_search_call, item_reference, …): kept as sent
            messages.append(dict(item))
    return messages


def _message(item: dict[str, Any], at: str) -> dict[str, Any]:
    role = item.get("role")
    if not isinstance(role, str):
        raise ResponsesFormatError(f"{at}.role: expected user, system, developer or assistant")
    message: dict[str, Any] = {"role": role}
    content = item.get("content")
    if isinstance(content, list):
        message["content"], refusal = _content(content, f"{at}.content")
        if refusal is not None:
            message["refusal"] = refusal
    else:
        message["content"] = content
    return message


def _content(parts: list[Any], at: str) -> tuple[Any, str | None]:
    """A message's content parts as chat content: text alone as one string, else chat's
    parts (text, image_url, file, input_audio); and a refusal's text, if there is one."""
    converted: list[Any] = []
    refusals: list[str] = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise ResponsesFormatError(f"{at}[{index}]: expected a content part (an object)")
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            converted.append({"type": "text", "text": part.get("text") or ""})
        elif kind == "refusal":
            refusals.append(part.get("refusal") or "")
        elif kind == "input_image" and "image_url" in part:
            image = {"url": part["image_url"], "detail": part.get("detail", "auto")}
            converted.append({"type": "image_url", "image_url": image})
        elif kind == "input_file":
            file = {k: part[k] for k in ("file_id", "file_data", "filename") if k in part}
            converted.append({"type": "file", "file": file})
        else:  # input_audio has chat's shape already; anything else is kept as sent
            converted.append(part)
    refusal = "".join(refusals) if refusals else None
    if all(part.get("type") == "text" for part in converted):
        return "".join(part["text"] for part in converted), refusal
    return converted, refusal


def _add_call(messages: list[dict[str, Any]], item: dict[str, Any], at: str) -> None:
    """A function_call item as a tool call of an assistant message. The calls of one answer
    arrive as consecutive items, after its text when there was any: chat keeps them in one
    assistant message, so they join the assistant message just before them."""
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise ResponsesFormatError(f"{at}: a function_call needs a call_id and a name (text)")
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": _compact(item.get("arguments"))},
    }
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "assistant":
        last.setdefault("tool_calls", []).append(call)
        return
    # Every framework sends null content beside tool calls.
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _tool_result(item: dict[str, Any], at: str) -> dict[str, Any]:
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        raise ResponsesFormatError(f"{at}: a function_call_output needs a call_id (text)")
    output = item.get("output")
    if isinstance(output, list) and all(
        isinstance(p, dict) and p.get("type") in _TEXT_PARTS for p in output
    ):
        output = "".join(p.get("text") or "" for p in output)
    elif not isinstance(output, str):  # an image or a file: as text, so nothing is lost
        output = compact_json(output)
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def _compact(arguments: Any) -> str:
    """Tool-call arguments as compact JSON: frameworks re-serialize the model's arguments
    before sending them back (spacing, escapes), which is no change of the agent's."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments  # not JSON: compared as the text it is
    return compact_json(arguments)


def compact_json(value: Any) -> str:
    """`value` as compact JSON text; a lone surrogate (half an emoji), which orjson refuses,
    written as its escape."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_FUNCTION_KEYS = ("name", "description", "parameters", "strict")  # in chat's order


def _tool(tool: Any) -> Any:
    """A function tool in chat's shape; a hosted tool (web_search, file_search, …) as sent."""
    if not isinstance(tool, dict) or tool.get("type") != "function" or "function" in tool:
        return tool
    function = {k: tool[k] for k in _FUNCTION_KEYS if k in tool}
    function.update((k, v) for k, v in tool.items() if k != "type" and k not in function)
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return choice  # "auto", "none", "required"
    if choice.get("type") == "function" and "function" not in choice:
        return {"type": "function", "function": {"name": choice.get("name")}}
    if choice.get("type") == "allowed_tools":
        tools = [_tool_choice(t) for t in choice.get("tools") or ()]
        return {
            "type": "allowed_tools",
            "allowed_tools": {"mode": choice.get("mode"), "tools": tools},
        }
    return choice
