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

from agentbench.runtime.message_view import MessageView

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
    messages = request.get("messages", ())
    if isinstance(messages, MessageView):
        total = _conversation_tokens(messages)
    else:
        total = sum(estimate_message_tokens(m) for m in messages)
    if request.get("tools"):
        total += estimate_tokens(orjson.dumps(request["tools"]).decode())
    return total


# The last views counted, by their conversation list, with the tokens of their conversation
# (system message excluded: it is re-rendered, the conversation only grows). Each step of a
# run repeats all earlier messages, so counting them again made a run's time quadratic. A view
# kept here keeps its list alive, so an id is never reused while its entry stands.
_COUNTED: dict[int, tuple[MessageView, int]] = {}
_COUNTED_MAX = 64


def _conversation_tokens(view: MessageView) -> int:
    system = view[0] if view.has_system else None
    known = _COUNTED.get(view.conversation_id)
    if known is not None and view.extends(known[0]):
        conversation = known[1] + sum(estimate_message_tokens(m) for m in view.since(known[0]))
    else:
        start = 1 if system is not None else 0
        conversation = sum(estimate_message_tokens(view[i]) for i in range(start, len(view)))
    if len(_COUNTED) >= _COUNTED_MAX:
        _COUNTED.clear()
    _COUNTED[view.conversation_id] = (view, conversation)
    return conversation + (estimate_message_tokens(system) if system is not None else 0)
