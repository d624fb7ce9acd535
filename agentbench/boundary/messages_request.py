"""Anthropic Messages API requests, normalized to the chat-completions shape agentbench compares.

`system` (text, or text blocks) becomes a first system message and `messages` the messages
after it: an assistant's `tool_use` blocks join its `tool_calls` (their `input` dumped as
compact JSON arguments, as chat carries them), each `tool_result` block a `tool` message in
the order sent (its text, its `is_error` kept when set), the rest of a user's blocks a user
message after them. Tools take chat's function shape (`input_schema` its `parameters`),
`tool_choice` chat's values (`any` is `required`; `disable_parallel_tool_use` is
`parallel_tool_calls: false`), `stop_sequences` is `stop`; every other setting (`max_tokens`,
`temperature`, `metadata`, `thinking`, `top_k`, …) keeps its name so drift sees it, and
`stream`, which says how to deliver the answer rather than what is asked, is dropped.
"""

from __future__ import annotations

from typing import Any

import orjson

from agentbench.runtime.completions import CompletionFormatError

# Keys the normalization maps itself; every other key but `stream` is kept by its name.
_MAPPED = frozenset({"model", "system", "messages", "tools", "tool_choice", "stop_sequences"})
_TRANSPORT = frozenset({"stream"})
_TOOL_KEYS = frozenset({"name", "description", "input_schema", "type"})


class MessagesFormatError(CompletionFormatError):
    """A Messages API request, answer or event agentbench cannot read; says where."""


def normalize_request(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages request body as the chat-completions-shaped request agentbench compares
    (see the module docstring). The body is not changed."""
    if not isinstance(body, dict):
        raise MessagesFormatError(f"the request body is {type(body).__name__}, not an object")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        messages.append({"role": "system", "content": _text_or_parts(system, "system")})
    given = body.get("messages")
    if not isinstance(given, list):
        raise MessagesFormatError("messages: expected a list of messages")
    for index, message in enumerate(given):
        messages.extend(_message(message, f"messages[{index}]"))
    request: dict[str, Any] = {"model": body["model"]} if "model" in body else {}
    request["messages"] = messages
    if "tools" in body:
        tools = body["tools"]
        request["tools"] = [_tool(t) for t in tools] if isinstance(tools, list) else tools
    if "tool_choice" in body:
        choice, parallel = _tool_choice(body["tool_choice"])
        if choice is not None:
            request["tool_choice"] = choice
        if parallel is not None:
            request["parallel_tool_calls"] = parallel
    if "stop_sequences" in body:
        request["stop"] = body["stop_sequences"]
    for key, value in body.items():
        if key not in _MAPPED and key not in _TRANSPORT:
            request[key] = value
    return request


def _text_or_parts(content: Any, where: str) -> Any:
    """Content as chat carries it: one plain text block (or a string) is its text; several
    blocks are parts, each kept whole (a block's `cache_control` is part of what is asked)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MessagesFormatError(f"{where}: expected text or a list of content blocks")
    for index, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise MessagesFormatError(f"{where}[{index}]: expected a content block with a type")
    if len(content) == 1 and content[0].keys() == {"type", "text"} and content[0]["type"] == "text":
        return content[0]["text"]
    return list(content)


def _message(message: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise MessagesFormatError(f"{where}: expected a message with role user or assistant")
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise MessagesFormatError(f"{where}.content: expected text or a list of content blocks")
    if role == "assistant":
        return [_assistant(content, where)]
    results = [
        _tool_result(block, f"{where}.content[{i}]")
        for i, block in enumerate(content)
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    if rest or not results:
        results.append({"role": "user", "content": _text_or_parts(rest, f"{where}.content")})
    return results


def _assistant(content: list[Any], where: str) -> dict[str, Any]:
    calls = []
    others = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise MessagesFormatError(f"{where}.content[{index}]: expected a content block")
        if block.get("type") == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            function = {"name": block.get("name"), "arguments": arguments}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
        else:
            others.append(block)
    if all(b.get("type") == "text" and b.keys() == {"type", "text"} for b in others):
        text: Any = "".join(b["text"] for b in others)
    else:  # thinking, a server tool's blocks: kept whole, so a change to them is drift
        text = others
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    content = block.get("content", "")
    if isinstance(content, list):
        texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
        # Text blocks are the result's text, JSON in it compared as data; an image stays whole.
        content = (
            "".join(b.get("text") or "" for b in texts)
            if len(texts) == len(content)
            else (_text_or_parts(content, f"{where}.content"))
        )
    message = {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": content}
    if block.get("is_error"):
        message["is_error"] = True
    return message


def _tool(tool: Any) -> Any:
    if not isinstance(tool, dict) or tool.get("type") not in (None, "custom"):
        return tool  # a server tool (web search, code execution): kept as sent
    function = {"name": tool.get("name")}
    if "description" in tool:
        function["description"] = tool["description"]
    function["parameters"] = tool.get("input_schema")
    extra = {k: v for k, v in tool.items() if k not in _TOOL_KEYS}
    return {"type": "function", "function": function, **extra}


def _tool_choice(choice: Any) -> tuple[Any, bool | None]:
    """Chat's `tool_choice` and `parallel_tool_calls` for a Messages `tool_choice`."""
    if not isinstance(choice, dict):
        return choice, None
    kind = choice.get("type")
    parallel = False if choice.get("disable_parallel_tool_use") else None
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", parallel
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}, parallel
    return choice, parallel
