"""Helpers for reference policies: deterministic stand-ins for a capable model.

A reference policy reads a chat-completions request the way a model would — the user's
question, the tool results so far — and answers with the next tool call or the final text.
`scripts/record_golden.py` serves the policies from an OpenAI-compatible server on 127.0.0.1
and records every suite through the real record path (openai SDK, HTTP, cassette files).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentbench import ToolCall
from agentbench.runtime.tools import observation_of


@dataclass(frozen=True)
class Observation:
    """One tool result the model has seen since the last user message."""

    tool: str
    arguments: dict[str, Any]
    content: str

    @property
    def failed(self) -> bool:
        return self.content.startswith(("[business_failure]", "[system_error]", "Error"))

    def json(self) -> Any:
        # A repeat warning from the runtime may follow the result; the result comes first.
        text = observation_of(self.content)
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text


def last_user(request: dict[str, Any]) -> str:
    for message in reversed(request["messages"]):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def observations(request: dict[str, Any]) -> list[Observation]:
    """Tool results after the last user message, paired with the calls that produced them."""
    messages = request["messages"]
    start = max(i for i, m in enumerate(messages) if m.get("role") in ("user", "system"))
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    seen: list[Observation] = []
    for message in messages[start:]:
        for call in message.get("tool_calls") or ():
            try:
                arguments = json.loads(call["function"]["arguments"] or "{}")
            except json.JSONDecodeError:
                arguments = {}
            calls[call["id"]] = (call["function"]["name"], arguments)
        if message.get("role") == "tool" and message.get("tool_call_id") in calls:
            name, arguments = calls[message["tool_call_id"]]
            seen.append(Observation(name, arguments, str(message.get("content") or "")))
    return seen


def results_of(request: dict[str, Any], tool: str) -> list[Observation]:
    return [o for o in observations(request) if o.tool == tool]


Plan = Callable[[re.Match[str], dict[str, Any]], Any]


def route(request: dict[str, Any], rules: list[tuple[str, Plan]], fallback: str) -> Any:
    """The first rule whose pattern matches the user's last message decides the next action."""
    question = last_user(request)
    for pattern, plan in rules:
        match = re.search(pattern, question, re.IGNORECASE)
        if match:
            return plan(match, request)
    return fallback


def call(tool: str, /, **arguments: Any) -> ToolCall:
    return ToolCall(tool, arguments)
