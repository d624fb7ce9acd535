"""Reference policy for the pydantic_ai_mcp suite: a bike parts desk, deterministically.

It answers from the tool results in the request, as pydantic-ai sends them back over Chat
Completions: an MCP tool's result is its structured content as JSON; an `isError` result
(`tool_error_behavior="failed"`) and a JSON-RPC error (a `ModelRetry`) both arrive as a failed
tool result, `{"error": "<what failed>"}`. It never calls a tool twice.
"""

from __future__ import annotations

import re
from typing import Any

from golden._reference import Observation, call, observations, route

SKU = r"([A-Z]-\d{3})"


def _failure(seen: Observation) -> str | None:
    """The failure a tool result says, or None when the call worked."""
    answer = seen.json()
    if isinstance(answer, dict) and ("sku" in answer or "reservation" in answer):
        return None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        return answer["error"]
    text = seen.content.strip()
    return text.splitlines()[0] if text else "no answer"


def _stock(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = observations(request)
    if not seen:
        return call("find_part", sku=match.group(1))
    failure = _failure(seen[-1])
    if failure is not None:
        return f"I could not look it up: {failure}"
    part = seen[-1].json()
    return f"{part['sku']} ({part['name']}): {part['in_stock']} in stock, bin {part['bin']}."


def _reserve(match: re.Match[str], request: dict[str, Any]) -> Any:
    quantity, sku = int(match.group(1)), match.group(2)
    seen = observations(request)
    if not seen:
        return call("reserve_part", sku=sku, quantity=quantity)
    failure = _failure(seen[-1])
    if failure is not None:
        refusal = re.search(r"only \d+ of [A-Z]-\d{3} in stock[^\"']*", failure)
        return f"The warehouse refused: {refusal.group(0) if refusal else failure}"
    return f"Reserved: {seen[-1].json()['reservation']}."


RULES = [
    (rf"\breserve (\d+) of {SKU}", _reserve),
    (rf"{SKU}", _stock),
]


def respond(request: dict[str, Any]) -> Any:
    return route(request, RULES, "I can look parts up and reserve them.")
