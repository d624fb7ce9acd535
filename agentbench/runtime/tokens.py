"""A cheap token estimate for when no tokenizer or reported usage is at hand.

English BPE tokenizers average about four characters a token; CJK text is about one token a
character (often more), so counting CJK characters separately keeps the estimate sane for
Chinese and Japanese instead of undercounting them fourfold.
"""

from __future__ import annotations

import math
from typing import Any

import orjson


def _is_wide(ch: str) -> bool:
    code = ord(ch)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xAC00 <= code <= 0xD7AF  # hangul
        or 0xF900 <= code <= 0xFAFF  # CJK compatibility ideographs
        or 0xFF00 <= code <= 0xFFEF  # full-width forms and punctuation
        or 0x3000 <= code <= 0x303F  # CJK punctuation
    )


def estimate_tokens(text: str) -> int:
    """Approximate token count of `text`: ~4 chars a token, one token per CJK character."""
    if not text:
        return 0
    wide = sum(1 for ch in text if ord(ch) >= 0x3000 and _is_wide(ch))
    return wide + math.ceil((len(text) - wide) / 4)


def estimate_message_tokens(message: dict[str, Any]) -> int:
    """Estimate one chat message, including the few tokens of per-message framing."""
    total = 4
    content = message.get("content")
    if isinstance(content, str):
        total += estimate_tokens(content)
    elif content is not None:
        total += estimate_tokens(orjson.dumps(content).decode())
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        total += estimate_tokens(function.get("name", "")) + estimate_tokens(
            function.get("arguments", "")
        )
    return total


def estimate_request_tokens(request: dict[str, Any]) -> int:
    """Estimate the prompt tokens of a chat-completions request body."""
    total = sum(estimate_message_tokens(m) for m in request.get("messages", ()))
    if request.get("tools"):
        total += estimate_tokens(orjson.dumps(request["tools"]).decode())
    return total
