"""Scoped context variables: namespacing, events, templates and what crosses a handoff."""

from __future__ import annotations

import pytest

from agentbench import Agent, Context, RunContext, Runner, ScriptedModel, ToolCall, UsageError, tool


def changes(result) -> list[tuple]:
    return [
        (e.scope, e.key, e.op, e.old, e.new) for e in result.events if e.kind == "context_changed"
    ]


@tool
def remember_order(ctx: RunContext, order_id: str) -> str:
    ctx.set("order_id", order_id)
    ctx.set("attempt", 1, scope="request")
    return "saved"


@tool
def update_order(ctx: RunContext, order_id: str) -> str:
    ctx.set("order_id", order_id)
    ctx.delete("attempt", scope="request")
    return "updated"


async def test_writes_are_namespaced_and_every_change_is_an_event() -> None:
    model = ScriptedModel(
        [
            ToolCall("remember_order", {"order_id": "A1"}),
            ToolCall("update_order", {"order_id": "B2"}),
            "ok",
        ]
    )
    agent = Agent(name="billing", tools=[remember_order, update_order])
    result = await Runner.run(agent, "go", model=model)
    assert changes(result) == [
        ("session", "billing.order_id", "add", None, "A1"),
        ("request", "billing.attempt", "add", None, 1),
        ("session", "billing.order_id", "change", "A1", "B2"),
        ("request", "billing.attempt", "remove", 1, None),
    ]
    assert result.context.session == {"billing.order_id": "B2"}
    # A change event follows the ToolFinished of the tool that made it.
    kinds = [e.kind for e in result.events]
    assert kinds.index("context_changed") == kinds.index("tool_finished") + 1


async def test_setting_the_same_value_is_not_a_change() -> None:
    model = ScriptedModel(
        [
            ToolCall("remember_order", {"order_id": "A1"}),
            ToolCall("update_order", {"order_id": "A1"}),
            "ok",
        ]
    )
    result = await Runner.run(
        Agent(name="billing", tools=[remember_order, update_order]), "go", model=model
    )
    assert [c[2] for c in changes(result) if c[0] == "session"] == ["add"]


def test_global_scope_is_read_only_configuration() -> None:
    ctx = RunContext("run_1", "billing", Context(global_={"region": "eu"}))
    assert ctx.get("region") == "eu"
    with pytest.raises(UsageError, match="global scope; it is read-only"):
        ctx.set("region", "us", scope="global")
    with pytest.raises(UsageError, match="not one of: request, session, global"):
        ctx.set("x", 1, scope="everywhere")


def test_lookup_prefers_request_then_session_then_global_and_own_namespace() -> None:
    ctx = RunContext(
        "run_1",
        "billing",
        Context(
            session={"tier": "gold", "billing.tier": "platinum"},
            request={"tier": "trial"},
            global_={"tier": "free"},
        ),
    )
    assert ctx.get("tier") == "platinum"  # own namespace first
    assert ctx.get("billing.tier") == "platinum"
    assert ctx.variables["tier"] == "trial"  # request over session over global


async def test_instructions_read_namespaced_and_plain_variables() -> None:
    model = ScriptedModel([ToolCall("remember_order", {"order_id": "A1"}), "ok"])
    agent = Agent(
        name="billing",
        instructions=(
            "Customer {{ customer }}"
            "{% if billing is defined %}, order {{ billing.order_id }}{% endif %}."
        ),
        tools=[remember_order],
        state_summary=False,
    )
    await Runner.run(agent, "go", model=model, context={"customer": "Ada"})
    first, second = (r["messages"][0]["content"] for r in model.requests)
    assert first == "Customer Ada."
    assert second == "Customer Ada, order A1."


async def test_result_context_continues_the_next_turn() -> None:
    agent = Agent(name="billing", tools=[remember_order])
    first = await Runner.run(
        agent, "go", model=ScriptedModel([ToolCall("remember_order", {"order_id": "A1"}), "ok"])
    )
    second_model = ScriptedModel(["still A1"])
    await Runner.run(
        Agent(name="billing", instructions="Order {{ billing.order_id }}."),
        "and now?",
        model=second_model,
        context=first.context,
    )
    assert second_model.requests[0]["messages"][0]["content"] == "Order A1."
    assert "billing.attempt" not in first.context.session  # request scope ended with the request


def test_handoff_context_drops_request_and_prunes_undeclared_namespaces() -> None:
    ctx = RunContext(
        "run_1",
        "triage",
        Context(
            session={
                "customer": "Ada",
                "triage.topic": "refund",
                "billing.card": "4242",
                "crm.vip": True,
            },
            request={"triage.draft": "..."},
            global_={"region": "eu"},
        ),
    )
    handed = ctx.for_handoff("refunds", reads=["triage"])
    assert handed.request == {}
    assert handed.session == {"customer": "Ada", "triage.topic": "refund"}
    assert dict(handed.global_) == {"region": "eu"}
