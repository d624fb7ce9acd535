"""Three agents: a router, a triage agent and a refund specialist with a write tool.

    python examples/support_desk.py

Turn 1: the router dispatches to triage; triage hands the case to refunds with the order id
as a context update; refunds looks the order up (a long result, which memory truncates),
issues the refund (a write) and answers. Turn 2 is a short follow-up: the router sends it
straight back to refunds without a model call. Everything runs on a ScriptedModel; the
printed timeline shows the handoffs, the context diffs and every memory decision.
"""

from __future__ import annotations

import asyncio

from agentbench import (
    Agent,
    BusinessFailure,
    MemoryPolicy,
    Router,
    RunContext,
    Runner,
    RunResult,
    ScriptedModel,
    ToolCall,
    tool,
)

ORDERS = {"A17": {"total": 42.5, "days_ago": 12, "status": "delivered"}}


@tool(effect="read_only", idempotent=True, max_result_chars=20_000)
def lookup_order(order_id: str) -> dict:
    """Look an order up, with its full event history.

    Args:
        order_id: The order id, e.g. "A17".
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise BusinessFailure(f"no order {order_id!r}")
    history = [f"{day}: scanned at depot {day % 7}" for day in range(300)]
    return {**order, "order_id": order_id, "history": history}


@tool(effect="write", timeout_s=5)
def issue_refund(ctx: RunContext, order_id: str, amount: float) -> str:
    """Refund an order (a write: money moves).

    Args:
        order_id: The order to refund.
        amount: Amount in EUR, at most the order total.
    """
    order = ORDERS[order_id]
    if order["days_ago"] > 30:
        raise BusinessFailure("orders older than 30 days cannot be refunded")
    if amount > order["total"]:
        raise BusinessFailure(f"amount {amount} exceeds the order total {order['total']}")
    ctx.set("refunded", {"order_id": order_id, "amount": amount})
    return f"refund of {amount} EUR for {order_id} issued"


refunds = Agent(
    name="refunds",
    description="Refunds for delivered orders.",
    instructions=(
        "You process refunds. {% if refunds is defined and refunds.order_id is defined %}"
        "The order is {{ refunds.order_id }}.{% endif %} Check the order, then refund it."
    ),
    tools=[lookup_order, issue_refund],
    reads=["triage"],
    memory=MemoryPolicy(max_messages=4, keep_recent=1, tool_result_chars=600),
)
triage = Agent(
    name="triage",
    description="Understands the customer's problem and routes it to a specialist.",
    instructions="You triage support requests for {{ customer }}.",
    handoffs=[refunds],
)
desk = Router(name="desk", agents=[triage, refunds])

TURN_1 = [
    ToolCall("dispatch_to_agent", {"agent_id": "triage", "refined_query": "Refund order A17."}),
    ToolCall(
        "transfer_to_refunds",
        {
            "reason": "customer asks for a refund",
            "summary": "Order A17, delivered 12 days ago, customer wants their money back.",
            "context_updates": {"order_id": "A17"},
        },
    ),
    ToolCall("lookup_order", {"order_id": "A17"}),
    ToolCall("issue_refund", {"order_id": "A17", "amount": 42.5}),
    "Your refund of 42.50 EUR for order A17 has been issued.",
]
TURN_2 = ["It usually reaches your account within 5 working days."]


async def run_demo(hooks: list | None = None) -> tuple[RunResult, RunResult, ScriptedModel]:
    model = ScriptedModel(TURN_1 + TURN_2)
    first = await Runner.run(
        desk,
        "I want my money back for A17",
        model=model,
        context={"customer": "Ada"},
        hooks=hooks or [],
    )
    second = await Runner.run(
        desk, "When will I get it?", model=model, context=first.context, hooks=hooks or []
    )
    model.assert_complete()
    return first, second, model


def show(event) -> None:
    details = {
        "run_started": lambda e: (
            f"agent={e.agent} parent={e.parent_run_id and e.parent_run_id[:12]}"
        ),
        "tool_finished": lambda e: f"{e.tool} → {e.result.kind}",
        "context_changed": lambda e: f"{e.scope} {e.key} {e.op}: {e.old!r} → {e.new!r}",
        "memory_decision": lambda e: (
            f"{e.action} {e.messages} msg ({e.reason}); ~{e.tokens_before}→{e.tokens_after} tokens"
        ),
        "handoff": lambda e: f"{e.from_agent} → {e.to_agent} ({e.mode}): {e.reason}",
        "run_finished": lambda e: f"stop_reason={e.stop_reason}",
    }
    if event.kind in details:
        print(
            f"  {event.run_id[:12]} #{event.seq:<2} {event.kind:<16} {details[event.kind](event)}"
        )


if __name__ == "__main__":
    first, second, _ = asyncio.run(run_demo([show]))
    print(f"\nturn 1 answered by {first.agent}: {first.output}")
    print(f"turn 2 answered by {second.agent}: {second.output}")
