"""A conversation as units that must stay whole, and the check that it is valid for the API.

The OpenAI API rejects a conversation where an assistant message with `tool_calls` is not
followed by one tool message per call, or where a tool message answers no pending call. Memory
therefore never edits single messages of a tool exchange: it keeps, summarizes or drops whole
units, and `problems()` is the invariant the tests check after every change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

UnitKind = Literal["user", "assistant", "tool_group", "summary", "other"]
SUMMARY_MARKER = "[Summary of earlier steps, compressed by memory]"


@dataclass
class Unit:
    kind: UnitKind
    messages: list[dict[str, Any]]

    @property
    def call_ids(self) -> list[str]:
        if self.kind != "tool_group":
            return []
        return [call["id"] for call in self.messages[0].get("tool_calls", ())]


def is_summary(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, str)
        and content.startswith(SUMMARY_MARKER)
    )


def split_units(messages: list[dict[str, Any]]) -> list[Unit]:
    """Group messages so each tool exchange (call + its results) is one unit."""
    units: list[Unit] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            ids = {call["id"] for call in message["tool_calls"]}
            group = [message]
            i += 1
            while (
                i < len(messages)
                and messages[i].get("role") == "tool"
                and messages[i].get("tool_call_id") in ids
            ):
                group.append(messages[i])
                i += 1
            units.append(Unit("tool_group", group))
            continue
        if role == "assistant":
            units.append(Unit("summary" if is_summary(message) else "assistant", [message]))
        elif role == "user":
            units.append(Unit("user", [message]))
        else:
            units.append(Unit("other", [message]))
        i += 1
    return units


def join_units(units: list[Unit]) -> list[dict[str, Any]]:
    return [message for unit in units for message in unit.messages]


def problems(messages: list[dict[str, Any]]) -> list[str]:
    """Every way `messages` breaks the tool-call pairing rules; empty when valid."""
    found: list[str] = []
    pending: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                found.append(f"messages[{index}]: tool message {call_id!r} answers no pending call")
            pending.discard(call_id)
            continue
        if pending:
            found.append(
                f"messages[{index}]: {role} message arrives while calls {sorted(pending)} "
                "have no result"
            )
            pending = set()
        if role == "assistant" and message.get("tool_calls"):
            pending = {call["id"] for call in message["tool_calls"]}
    if pending:
        found.append(f"end of conversation: calls {sorted(pending)} have no result")
    return found
