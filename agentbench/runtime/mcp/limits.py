"""How large a message from an MCP server may be, and what takes the place of one too large.

A server's message is read only up to `max_message_bytes`; past that it is read on and thrown
away, keeping its first and last bytes and its size, so memory stays bounded and the connection
stays usable (the next message starts after it). The call it answered still gets an answer: a
JSON-RPC error made here, for the request whose id the kept bytes name, that says the size and
the limit (`too_large`). A message that names no request of ours (a notification, a request
from the server, or a response laid out so its id is out of reach) is dropped and remembered.
This module never imports the `mcp` SDK at import time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# JSON-RPC leaves -32000..-32099 to implementations; the SDK uses -32000 and -32001.
MESSAGE_TOO_LARGE = -32099
_MARK = "agentbench.message_too_large"
_KEEP = 4096  # bytes kept from each end of a message thrown away: where its id is
# `"id": 7}` or `"id": 7, "jsonrpc": "2.0"}` at the very end of a message (the TypeScript SDK
# writes the result first); the comma before it puts it at the top level, never in a string.
_TRAILING_ID = re.compile(
    rb',\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z'
)


class Discarded:
    """A message being thrown away: its size, its first and its last bytes."""

    def __init__(self, start: bytes | bytearray) -> None:
        self.head = bytes(start[:_KEEP])
        self.tail = bytes(start[-_KEEP:])
        self.size = len(start)

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        self.size += len(chunk)
        self.tail = (self.tail + bytes(chunk[-_KEEP:]))[-_KEEP:]

    def response_id(self) -> int | str | None:
        """The id of the JSON-RPC response this was; None for a request or a notification
        from the server, or when its id is not within the bytes kept."""
        return response_id(self.head, self.tail)

    def is_request(self) -> bool:
        """Whether this was a request or a notification from the server (it has a method)."""
        return any(key == "method" for key, _ in _leading_members(self._head_text()))

    def _head_text(self) -> str:
        return self.head.decode("utf-8", errors="replace")


def response_id(head: bytes, tail: bytes) -> int | str | None:
    """The top-level `id` of a JSON-RPC response known by its first and last bytes."""
    found: Any = None
    for key, value in _leading_members(head.decode("utf-8", errors="replace")):
        if key == "method":
            return None  # a request or a notification: no call of ours waits for it
        if key == "id":
            found = value
            break
    if found is None:
        match = _TRAILING_ID.search(tail)
        if match is not None:
            found = json.loads(match.group(1))
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None


_NESTED = object()


def _leading_members(text: str) -> list[tuple[str, Any]]:
    """The top-level members of a JSON object from its start, as far as they are scalars
    (the first object or array value, the result itself, ends the list)."""
    decoder = json.JSONDecoder()
    members: list[tuple[str, Any]] = []
    at = _skip_space(text, 0)
    if text[at : at + 1] != "{":
        return members
    at += 1
    while True:
        at = _skip_space(text, at)
        try:
            key, at = decoder.raw_decode(text, at)
            at = _skip_space(text, at)
            if not isinstance(key, str) or text[at : at + 1] != ":":
                return members
            at = _skip_space(text, at + 1)
            if text[at : at + 1] in ("{", "["):
                members.append((key, _NESTED))
                return members
            value, at = decoder.raw_decode(text, at)
        except ValueError:  # cut off within the bytes kept, or not JSON
            return members
        members.append((key, value))
        at = _skip_space(text, at)
        if text[at : at + 1] != ",":
            return members
        at += 1


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def too_large_error(request_id: int | str, size: int, limit: int) -> dict[str, Any]:
    """The JSON-RPC error that answers `request_id` in place of a message over the limit."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": MESSAGE_TOO_LARGE,
            "message": f"the answer was {size:,} bytes, over the limit of {limit:,} bytes",
            "data": {_MARK: True, "size": size, "limit": limit},
        },
    }


@dataclass(frozen=True)
class TooLarge:
    """A message refused for its size: how large it was and the limit it passed."""

    size: int
    limit: int

    def describe(self) -> str:
        return (
            f"a message of {self.size:,} bytes, over the limit of {self.limit:,} bytes "
            "(max_message_bytes)"
        )


def too_large(data: Any) -> TooLarge | None:
    """The size and limit of a `too_large_error`, from its `data`; None for any other error."""
    if isinstance(data, dict) and data.get(_MARK) is True:
        size, limit = data.get("size"), data.get("limit")
        if isinstance(size, int) and isinstance(limit, int):
            return TooLarge(size, limit)
    return None
