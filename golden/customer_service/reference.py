"""Reference policy for the customer-service suite: router, triage and refunds in turn."""

from __future__ import annotations

import re
from typing import Any

from golden._reference import call, last_user, observations, results_of

ORDER = re.compile(r"\b([A-Z]\d{2})\b")


def _agent(request: dict[str, Any]) -> str:
    names = {t["function"]["name"] for t in request.get("tools", ())}
    if "dispatch_to_agent" in names:
        return "desk"
    if "transfer_to_refunds" in names:
        return "triage"
    return "refunds"


def _desk(request: dict[str, Any]) -> Any:
    question = last_user(request)
    if re.search(r"refund|money back", question, re.I):
        order = ORDER.search(question)
        query = f"Refund order {order.group(1)}." if order else "The customer wants a refund."
        return call("dispatch_to_agent", agent_id="triage", refined_query=query + f" ({question})")
    return call("dispatch_to_agent", agent_id="triage", refined_query=question)


def _triage(request: dict[str, Any]) -> Any:
    question = last_user(request)
    order = ORDER.search(question)
    if re.search(r"refund", question, re.I) and order:
        return call(
            "transfer_to_refunds",
            reason="refund request",
            summary=f"Customer asks for a refund of order {order.group(1)}.",
            context_updates={"order_id": order.group(1)},
        )
    if re.search(r"subscription", question, re.I):
        return "I can't change subscriptions here; please use your account page."
    if order:
        seen = results_of(request, "order_status")
        if not seen:
            return call("order_status", order_id=order.group(1))
        if seen[-1].failed:
            return f"I can't find order {order.group(1)}."
        status = seen[-1].json()
        return f"Order {status['order_id']} is {status['status']} (ordered {status['ordered']})."
    if re.search(r"opening hours|open", question, re.I):
        return "We are open Monday to Friday, 9:00 to 17:00."
    return "Could you tell me your order number?"


def _refunds(request: dict[str, Any]) -> Any:
    system = request["messages"][0]["content"]
    question = last_user(request)
    order = ORDER.search(system) or ORDER.search(question)
    if re.search(r"when will i get", question, re.I):
        return "Refunds reach your account within 5 working days."
    if order is None:
        return "Which order should I refund?"
    order_id = order.group(1)
    status = results_of(request, "order_status")
    if not status:
        return call("order_status", order_id=order_id)
    if status[-1].failed:
        return f"I can't find order {order_id}, so I can't refund it."
    total = status[-1].json()["total"]
    attempts = [o for o in observations(request) if o.tool == "issue_refund"]
    if not attempts or (attempts[-1].content.startswith("[system_error]") and len(attempts) < 3):
        return call(
            "issue_refund", order_id=order_id, amount=total, idempotency_key=f"refund-{order_id}"
        )
    last = attempts[-1]
    if last.failed:
        reason = last.content.splitlines()[0].removeprefix("[business_failure] ")
        return f"I could not refund order {order_id}: {reason}."
    refund = last.json()
    amount = refund["amount"]
    return f"Refund {refund['refund_id']} of {amount} EUR for order {order_id} is on its way."


def respond(request: dict[str, Any]) -> Any:
    return {"desk": _desk, "triage": _triage, "refunds": _refunds}[_agent(request)](request)
