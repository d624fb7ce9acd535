"""Reference policy for the openai_agents_mcp suite: a parts desk, deterministically.

It answers from the tool results in the request, as the Agents SDK sends them back: an MCP
tool's result is its content as text (the structured JSON), an `isError` result and a
JSON-RPC error both arrive as the SDK's error text.
"""

from __future__ import annotations

import re
from typing import Any

from golden._reference import Observation, call, observations, route

SKU = r"([A-Z]-\d{3})"


def _failure(seen: Observation) -> str | None:
    """The failure an MCP tool result says, or None when the call worked."""
    text = seen.content
    if text.lstrip().startswith("{") and ('"sku"' in text or '"reservation"' in text):
        return None
    return text.strip().splitlines()[0] if text.strip() else "no answer"


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
