"""A cheap token estimate for when no tokenizer or reported usage is at hand.

English BPE tokenizers average about four characters a token; CJK text is about one token a
character (often more), so counting CJK characters separately keeps the estimate sane for
Chinese and Japanese instead of undercounting them fourfold.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

_WIDE = re.compile(
    "[\u3000-\u303f"  # CJK punctuation
    "\u3040-\u30ff"  # kana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef]"  # full-width forms
)


def estimate_tokens(text: str) -> int:
    """Approximate token count of `text`: ~4 chars a token, one token per CJK character."""
    if not text:
        return 0
    if text.isascii():  # the common case, in C: no per-character work
        return math.ceil(len(text) / 4)
    wide = len(_WIDE.findall(text))
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
