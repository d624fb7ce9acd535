"""Customer service (seed 001): a router, a triage agent and a refund specialist.

Triage hands refund cases to the specialist with the order id as a context update; the
specialist's `issue_refund` is a write tool made idempotent by an idempotency key kept in the
conversation's session context, so a retried refund never pays twice. Refunds over 100 EUR
need a gold-tier customer (`customer_tier` in the context).
"""

from __future__ import annotations

from datetime import date

from agentbench import Agent, BusinessFailure, Router, RunContext, tool

TODAY = date(2026, 6, 30)
ORDERS: dict[str, dict] = {
    "A17": {"total": 42.5, "ordered": "2026-06-18", "status": "delivered"},
    "B02": {"total": 89.0, "ordered": "2026-05-10", "status": "delivered"},
    "C33": {"total": 150.0, "ordered": "2026-06-20", "status": "delivered"},
    "D44": {"total": 64.0, "ordered": "2026-06-25", "status": "delivered"},
    "E05": {"total": 19.9, "ordered": "2026-06-28", "status": "in transit"},
}
FLAKY_GATEWAY = {"D44"}  # the first attempt for these times out at the payment gateway


@tool(effect="read_only", idempotent=True)
def order_status(order_id: str) -> dict:
    """Status, total and order date of an order.

    Args:
        order_id: The order id, e.g. "A17".
    """
    order = ORDERS.get(order_id.upper())
    if order is None:
        raise BusinessFailure(f"no order {order_id!r}")
    age = (TODAY - date.fromisoformat(order["ordered"])).days
    return {"order_id": order_id.upper(), **order, "age_days": age}


@tool(effect="write", idempotent=True, timeout_s=5)
def issue_refund(ctx: RunContext, order_id: str, amount: float, idempotency_key: str) -> dict:
    """Refund an order. Money moves: repeat a failed call with the same idempotency key.

    Args:
        order_id: The order to refund.
        amount: Amount in EUR, at most the order total.
        idempotency_key: Unique per refund; a repeated key returns the first refund.
    """
    issued = dict(ctx.get("issued") or {})
    if idempotency_key in issued:
        return {**issued[idempotency_key], "repeated": True}
    order = ORDERS.get(order_id.upper())
    if order is None:
        raise BusinessFailure(f"no order {order_id!r}")
    age = (TODAY - date.fromisoformat(order["ordered"])).days
    if age > 30:
        raise BusinessFailure(f"order {order_id} is {age} days old; refunds close after 30 days")
    if amount > order["total"]:
        raise BusinessFailure(f"{amount} exceeds the order total {order['total']}")
    if amount > 100 and ctx.get("customer_tier") != "gold":
        raise BusinessFailure("refunds over 100 EUR need a gold-tier customer")
    attempts = dict(ctx.get("gateway_attempts") or {})
    attempts[idempotency_key] = attempts.get(idempotency_key, 0) + 1
    ctx.set("gateway_attempts", attempts)
    if order_id.upper() in FLAKY_GATEWAY and attempts[idempotency_key] == 1:
        raise TimeoutError("payment gateway did not answer in time")
    refund = {"refund_id": f"R-{order_id.upper()}-{int(amount * 100)}", "amount": amount}
    issued[idempotency_key] = refund
    ctx.set("issued", issued)
    return refund


refunds = Agent(
    name="refunds",
    description="Refunds for delivered orders.",
    instructions=(
        "You process refunds for a {{ customer_tier | default('standard') }}-tier customer."
        "{% if refunds is defined and refunds.order_id is defined %} The order is "
        "{{ refunds.order_id }}.{% endif %} Check the order, then refund its full total with "
        "idempotency key refund-<order id>. Explain any refusal."
    ),
    tools=[order_status, issue_refund],
    reads=["triage"],
)
triage = Agent(
    name="triage",
    description="Understands the customer's request; answers simple questions itself.",
    instructions=(
        "You triage support requests for a {{ customer_tier | default('standard') }}-tier "
        "customer. Hand refunds to the refund specialist with the order id in context_updates; "
        "answer order-status and general questions yourself."
    ),
    tools=[order_status],
    handoffs=[refunds],
)
desk = Router(name="desk", agents=[triage, refunds])
