"""Reference policy for the mcp_live suite: a parts-desk assistant, deterministically.

It answers from the tool results in the request, so what the MCP adapter made of the stub
server's answers (structured data, an `isError` refusal, text beside structured content) is
what the final answer says.
"""

from __future__ import annotations

import re
from typing import Any

from golden._reference import call, observations, route

SKU = r"([A-Z]-\d{3})"


def _refusal(text: str) -> str:
    # "[business_failure] only 2 of B-200 in stock; …\n(The tool worked; …)": its first line
    return text.removeprefix("[business_failure] ").splitlines()[0]


def _stock(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = observations(request)
    if not seen:
        return call("warehouse_find_part", sku=match.group(1))
    if seen[-1].failed:
        return f"I could not look it up: {_refusal(seen[-1].content)}."
    part = seen[-1].json()
    return f"{part['sku']} ({part['name']}): {part['in_stock']} in stock, bin {part['bin']}."


def _reserve(match: re.Match[str], request: dict[str, Any]) -> Any:
    quantity, sku = int(match.group(1)), match.group(2)
    seen = observations(request)
    if not seen:
        return call("warehouse_reserve_part", sku=sku, quantity=quantity)
    if seen[-1].failed:
        return f"The warehouse refused: {_refusal(seen[-1].content)}."
    return f"Reserved: {seen[-1].json()['reservation']}."


def _history(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = observations(request)
    if not seen:
        return call("warehouse_part_history", sku=match.group(1))
    history = seen[-1].json()
    if isinstance(history, dict) and "text" in history:
        return f"{match.group(1)}: {history['text']}"
    return f"{match.group(1)}: {history}"


RULES = [
    (rf"\breserve (\d+) of {SKU}", _reserve),
    (rf"history of (?:part )?{SKU}", _history),
    (rf"{SKU}", _stock),
]


def respond(request: dict[str, Any]) -> Any:
    return route(request, RULES, "I can look parts up, reserve them and read their history.")
