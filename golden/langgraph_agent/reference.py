"""Reference policy for the LangGraph stock desk and its procurement worker.

The worker is the call offered `supplier_quote`; every other call is the supervisor's. Tool-call
ids are pinned (`call_<n>`, counted through the conversation): the agent sends them back in
every later request, so a re-recorded cassette's requests stay the same.
"""

from __future__ import annotations

import re
from typing import Any

from agentbench import ToolCall
from golden._reference import last_user, observations, results_of

SKU = re.compile(r"\b([A-Z]-\d{3})\b")
ORDER = re.compile(r"\border (\d+)\b", re.I)
QUANTITY = re.compile(r"\b(\d+) (?:of|units|pieces|boxes)\b", re.I)


def _calls(request: dict[str, Any], *wanted: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    seen = sum(len(m.get("tool_calls") or ()) for m in request["messages"])
    return [
        ToolCall(name, arguments, id=f"call_{seen + n}")
        for n, (name, arguments) in enumerate(wanted, 1)
    ]


def _user_said(request: dict[str, Any]) -> str:
    """Everything the user said, for what a follow-up refers to."""
    return " ".join(str(m.get("content") or "") for m in request["messages"] if m["role"] == "user")


def _stock_line(stock: dict[str, Any]) -> str:
    return f"{stock['free']} of {stock['sku']} ({stock['name']}) free in bin {stock['bin']}"


def _stock(skus: list[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "check_stock")
    if not seen:
        return _calls(request, *[("check_stock", {"sku": sku}) for sku in skus])
    lines = []
    for observation in seen:
        result = observation.json()
        unknown = f"there is no part {observation.arguments['sku']}"
        lines.append(unknown if "error" in result else _stock_line(result))
    text = "; ".join(lines)
    return text[0].upper() + text[1:] + "."


def _reserve(request: dict[str, Any]) -> Any:
    said = _user_said(request)
    sku, order, quantity = SKU.findall(said), ORDER.findall(said), QUANTITY.findall(said)
    if not (sku and order and quantity):
        return "Which part, how many, and for which order?"
    wanted = {"sku": sku[-1], "quantity": int(quantity[-1]), "order_id": order[-1]}
    stock = results_of(request, "check_stock")
    if not stock:
        return _calls(request, ("check_stock", {"sku": wanted["sku"]}))
    free = stock[-1].json()["free"]
    if wanted["quantity"] > free:
        if not results_of(request, "transfer_to_procurement"):
            shortfall = f"{wanted['quantity'] - free} of {wanted['sku']} for order {order[-1]}"
            return _calls(request, ("transfer_to_procurement", {"shortfall": shortfall}))
        return "Procurement has it."
    reserved = results_of(request, "reserve_stock")
    if not reserved:
        return _calls(request, ("reserve_stock", wanted))
    done = reserved[-1].json()
    if "error" in done:
        return f"I could not reserve them: {done['error']}."
    what = f"{done['quantity']} of {wanted['sku']} for order {order[-1]}"
    return f"Reserved {what}: {done['reservation']}."


def _supervisor(request: dict[str, Any]) -> Any:
    question = last_user(request)
    if re.search(r"\breserve\b", question, re.I):
        return _reserve(request)
    skus = SKU.findall(question)
    if skus:
        return _stock(skus, request)
    return "Which part number (like B-108) should I look up?"


def _procurement(request: dict[str, Any]) -> Any:
    handed = [o for o in observations(request) if o.tool == "transfer_to_procurement"]
    if not handed:
        return "The stock desk sent me nothing to buy."
    shortfall = handed[-1].arguments["shortfall"]
    found = re.match(r"(\d+) of ([A-Z]-\d{3})", shortfall)
    if found is None:
        return f"I cannot read the shortfall {shortfall!r}."
    quantity, sku = int(found.group(1)), found.group(2)
    quotes = results_of(request, "supplier_quote")
    if not quotes:
        return _calls(request, ("supplier_quote", {"sku": sku, "quantity": quantity}))
    quote = quotes[-1].json()
    if "error" in quote:
        return f"No supplier sells {sku}."
    return (
        f"We are {quantity} of {sku} short. {quote['supplier']} quotes {quote['total_eur']} EUR "
        f"({quote['quote']}), delivered in {quote['lead_days']} days."
    )


def respond(request: dict[str, Any]) -> Any:
    names = {t["function"]["name"] for t in request.get("tools") or ()}
    return _procurement(request) if "supplier_quote" in names else _supervisor(request)
