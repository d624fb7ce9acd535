"""Redacting a streamed model answer, whose secrets are split across chunks.

A stream carries the answer's text and each tool call's arguments in fragments of a few
characters, so a secret is spread over several chunks and no rule matches any one of them.
The fragments of each field are joined and the whole is redacted; only when something was
masked does the redacted whole take the first fragment's place and the other fragments become
empty. The stream then still assembles to the same (masked) answer, and a stream with nothing
secret in it is left exactly as it was. Chat's `chat.completion.chunk` dicts, the Responses
API's events (`response.output_text.delta`, …) and Anthropic's Messages events
(`content_block_delta`: text, tool input JSON, thinking) are read.
"""

from __future__ import annotations

from typing import Any

import orjson

from agentbench.trace.redaction.redactor import Redactor

# Delta fields that arrive in fragments and are concatenated by whoever reads the stream.
_TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")

# The Responses API's fragment events, each with the key that tells its item's parts apart.
_RESPONSES_DELTAS = {
    "response.output_text.delta": "content_index",
    "response.refusal.delta": "content_index",
    "response.reasoning_text.delta": "content_index",
    "response.reasoning_summary_text.delta": "summary_index",
    "response.function_call_arguments.delta": None,
}

# Anthropic's `content_block_delta` kinds, each with the key its fragment is under.
_MESSAGES_DELTAS = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
}

_Slot = tuple[dict[str, Any], str]  # the dict holding a fragment, and its key


def redact_chunks(chunks: list[Any], redactor: Redactor) -> list[Any]:
    """A redacted copy of a stream's `chat.completion.chunk` dicts or Responses API events
    (the input is unchanged)."""
    copied = orjson.loads(orjson.dumps(chunks))
    for slots in _fragments(copied).values():
        whole = "".join(holder[key] for holder, key in slots)
        masked = redactor.text(whole)
        if masked != whole:
            first, *rest = slots
            first[0][first[1]] = masked
            for holder, key in rest:
                holder[key] = ""
    return redactor.value(copied)


def _fragments(chunks: list[Any]) -> dict[tuple[Any, ...], list[_Slot]]:
    """Where each streamed field's fragments are, in order: per choice, its text fields and
    each tool call's arguments; per Responses output item, each part's deltas."""
    found: dict[tuple[Any, ...], list[_Slot]] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        kind = chunk.get("type")
        if kind in _RESPONSES_DELTAS and isinstance(chunk.get("delta"), str):
            part = _RESPONSES_DELTAS[kind]
            slot = (kind, chunk.get("output_index"), chunk.get(part) if part else None)
            found.setdefault(slot, []).append((chunk, "delta"))
            continue
        if kind == "content_block_delta":
            _add_block_delta(found, chunk)
            continue
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            number = choice.get("index", 0)
            for name in _TEXT_FIELDS:
                if isinstance(delta.get(name), str):
                    found.setdefault((number, name), []).append((delta, name))
            for call in delta.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    slot = (number, "arguments", call.get("index", 0))
                    found.setdefault(slot, []).append((function, "arguments"))
    return found


def _add_block_delta(found: dict[tuple[Any, ...], list[_Slot]], event: dict[str, Any]) -> None:
    """A Messages stream's fragment, by its content block and kind."""
    delta = event.get("delta")
    if not isinstance(delta, dict):
        return
    key = _MESSAGES_DELTAS.get(delta.get("type"))
    if key is not None and isinstance(delta.get(key), str):
        found.setdefault(("content_block", event.get("index"), key), []).append((delta, key))
