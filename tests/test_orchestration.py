"""Handoffs (tool and structured), the router, chains, the registry and the ping-pong guard."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from agentbench import (
    Agent,
    AgentRegistry,
    Router,
    Runner,
    ScriptedModel,
    StopReason,
    ToolCall,
    UsageError,
    tool,
)
from agentbench.runtime.conversation import problems


@tool(effect="read_only")
def order_status(order_id: str) -> str:
    return f"{order_id}: delivered"


def make_pair(**triage_options):
    refunds = Agent(
        name="refunds", description="Handles refunds.", tools=[order_status], reads=["triage"]
    )
    triage = Agent(
        name="triage",
        instructions="Triage for {{ customer }}.",
        handoffs=[refunds],
        **triage_options,
    )
    return triage, refunds


def transfer(**arguments) -> ToolCall:
    arguments.setdefault("reason", "refund request")
    arguments.setdefault("summary", "Customer wants a refund for A1.")
    return ToolCall("transfer_to_refunds", arguments)


async def test_handoff_tool_is_offered_with_its_schema() -> None:
    triage, _ = make_pair()
    [schema] = triage.tool_schemas()
    assert schema["function"]["name"] == "transfer_to_refunds"
    assert "Handles refunds." in schema["function"]["description"]
    assert schema["function"]["parameters"]["required"] == ["reason", "summary"]


async def test_tool_handoff_runs_the_target_as_a_child_run() -> None:
    triage, _ = make_pair()
    model = ScriptedModel(
        [
            transfer(context_updates={"order_id": "A1"}),
            ToolCall("order_status", {"order_id": "A1"}),
            "A1 is delivered; refund issued.",
        ]
    )
    result = await Runner.run(
        triage,
        "I want a refund for A1",
        model=model,
        context={"customer": "Ada", "triage.mood": "upset", "billing.card": "4242"},
    )
    first, second = result.runs
    assert (first.agent, first.stop_reason) == ("triage", StopReason.HANDOFF)
    assert (second.agent, second.stop_reason) == ("refunds", StopReason.COMPLETED)
    assert result is second and result.output == "A1 is delivered; refund issued."
    assert second.parent_run_id == first.run_id

    handoff = next(e for e in first.events if e.kind == "handoff")
    assert (handoff.mode, handoff.from_agent, handoff.to_agent) == ("tool", "triage", "refunds")
    assert handoff.child_run_id == second.run_id
    assert first.events[-1].kind == "run_finished"
    change = next(e for e in first.events if e.kind == "context_changed")
    assert (change.key, change.new) == ("refunds.order_id", "A1")

    started = second.events[0]
    assert started.parent_run_id == first.run_id
    # Request scope gone, session kept where readable, undeclared namespaces pruned.
    assert started.context["session"] == {
        "customer": "Ada",
        "triage.mood": "upset",
        "refunds.order_id": "A1",
    }
    # The target continues mid-conversation: the dialogue and a note, not triage's tool calls.
    refunds_request = model.requests[1]
    system = refunds_request["messages"][0]["content"]
    assert "## Handoff\nYou are taking over this conversation from the agent 'triage'." in system
    assert "Pending problem: Customer wants a refund for A1." in system
    assert refunds_request["messages"][1:] == [
        {"role": "user", "content": "I want a refund for A1"}
    ]
    assert problems(first.messages[1:]) == []
    # The conversation's session has everything, for the next turn.
    assert result.context.session["billing.card"] == "4242"


async def test_structured_handoff_decision() -> None:
    triage, _ = make_pair(handoff_style="structured")
    assert triage.tool_schemas() == []
    model = ScriptedModel(
        [
            '{"handoff_to": "refunds", "reason": "refund", "summary": "A1 refund", '
            '"context_updates": {"order_id": "A1"}}',
            "Refunded.",
        ]
    )
    result = await Runner.run(triage, "refund A1", model=model, context={"customer": "Ada"})
    assert [r.agent for r in result.runs] == ["triage", "refunds"]
    assert result.output == "Refunded."
    handoff = next(e for e in result.runs[0].events if e.kind == "handoff")
    assert handoff.mode == "structured"
    assert result.context.session["refunds.order_id"] == "A1"
    assert '"handoff_to"' in model.requests[0]["messages"][0]["content"]


async def test_structured_answer_without_handoff_completes() -> None:
    triage, _ = make_pair(handoff_style="structured")
    model = ScriptedModel(['{"answer": "Our opening hours are 9 to 5."}'])
    result = await Runner.run(triage, "hours?", model=model, context={"customer": "Ada"})
    assert result.output == "Our opening hours are 9 to 5."
    assert len(result.runs) == 1


async def test_structured_handoff_to_an_undeclared_agent_is_corrected() -> None:
    triage, _ = make_pair(handoff_style="structured")
    model = ScriptedModel(
        ['{"handoff_to": "legal"}', '{"handoff_to": "refunds", "summary": "x"}', "ok"]
    )
    result = await Runner.run(triage, "help", model=model, context={"customer": "Ada"})
    assert [r.agent for r in result.runs] == ["triage", "refunds"]
    assert "Input should be 'refunds'" in model.requests[1]["messages"][-1]["content"]


def test_structured_style_and_output_type_conflict() -> None:
    from pydantic import BaseModel

    class Out(BaseModel):
        x: int

    with pytest.raises(UsageError, match="cannot also have an output_type"):
        make_pair(handoff_style="structured", output_type=Out)


async def test_only_one_handoff_per_turn() -> None:
    refunds = Agent(name="refunds")
    billing = Agent(name="billing")
    triage = Agent(name="triage", handoffs=[refunds, billing])
    model = ScriptedModel(
        [[transfer(), ToolCall("transfer_to_billing", {"reason": "r", "summary": "s"})], "done"]
    )
    result = await Runner.run(triage, "go", model=model)
    assert [r.agent for r in result.runs] == ["triage", "refunds"]
    rejected = next(e for e in result.runs[0].events if e.kind == "tool_call_rejected")
    assert rejected.tool == "transfer_to_billing"
    assert "only one handoff per turn" in rejected.message


async def test_ping_pong_between_two_agents_is_stopped() -> None:
    a = Agent(name="a")
    b = Agent(name="b", handoffs=[a])
    a.add_handoff(b)
    bounce_a = ToolCall("transfer_to_b", {"reason": "yours", "summary": "s"})
    bounce_b = ToolCall("transfer_to_a", {"reason": "no, yours", "summary": "s"})
    model = ScriptedModel([bounce_a, bounce_b, bounce_a, "never"])
    result = await Runner.run(a, "go", model=model)
    assert [r.agent for r in result.runs] == ["a", "b", "a"]
    assert [r.stop_reason for r in result.runs] == [
        StopReason.HANDOFF,
        StopReason.HANDOFF,
        StopReason.LOOP_DETECTED,
    ]
    guard = next(e for e in result.events if e.kind == "guard_triggered")
    assert guard.guard == "ping_pong"
    assert "a → b → a → b" in guard.message
    assert model.remaining == 1


async def test_router_dispatches_with_a_refined_query_and_an_enum_of_agents() -> None:
    billing = Agent(name="billing", description="Invoices and payments.")
    shipping = Agent(name="shipping", description="Deliveries.")
    router = Router(name="desk", agents=[billing, shipping])
    [schema] = router.tool_schemas()
    params = schema["function"]["parameters"]
    assert params["properties"]["agent_id"]["enum"] == ["billing", "shipping"]
    assert params["required"] == ["agent_id", "refined_query"]
    assert "- billing: Invoices and payments." in schema["function"]["description"]

    model = ScriptedModel(
        [
            ToolCall(
                "dispatch_to_agent",
                {"agent_id": "shipping", "refined_query": "Where is parcel P9?"},
            ),
            "P9 is out for delivery.",
            "Tomorrow before noon.",
            ToolCall(
                "dispatch_to_agent",
                {"agent_id": "billing", "refined_query": "Send invoice for P9."},
            ),
            "Invoice sent.",
        ]
    )
    first = await Runner.run(router, "hey where's my parcel P9??", model=model)
    assert first.agent == "shipping"
    assert model.requests[1]["messages"][1:] == [{"role": "user", "content": "Where is parcel P9?"}]
    # A short follow-up sticks with the previous agent, without asking the router's model.
    second = await Runner.run(router, "and when exactly?", model=model, context=first.context)
    assert [r.agent for r in second.runs] == ["desk", "shipping"]
    assert second.runs[0].iterations == 0
    handoff = next(e for e in second.runs[0].events if e.kind == "handoff")
    assert handoff.reason == "short follow-up stays with shipping"
    # A longer request goes back through the router's model.
    third = await Runner.run(
        router,
        "also I need the invoice for that order sent to my accountant please",
        model=model,
        context=second.context,
    )
    assert third.agent == "billing"
    model.assert_complete()


async def test_chain_feeds_each_output_to_the_next_agent() -> None:
    outline = Agent(name="outline")
    draft = Agent(name="draft")
    polish = Agent(name="polish")
    model = ScriptedModel(["1. intro 2. body", "Intro. Body.", "Intro! Body!"])
    result = await Runner.run_chain([outline, draft, polish], "write about tea", model=model)
    assert [r.agent for r in result.runs] == ["outline", "draft", "polish"]
    assert all(r.stop_reason is StopReason.COMPLETED for r in result.runs)
    assert result.output == "Intro! Body!"
    assert model.requests[1]["messages"][1:] == [{"role": "user", "content": "1. intro 2. body"}]
    assert model.requests[2]["messages"][1:] == [{"role": "user", "content": "Intro. Body."}]
    links = [e for r in result.runs for e in r.events if e.kind == "handoff"]
    assert [(e.from_agent, e.to_agent, e.mode) for e in links] == [
        ("outline", "draft", "chain"),
        ("draft", "polish", "chain"),
    ]
    assert [r.parent_run_id for r in result.runs] == [
        None,
        result.runs[0].run_id,
        result.runs[1].run_id,
    ]


async def test_chain_stops_when_a_step_fails() -> None:
    model = ScriptedModel(["step one", RuntimeError("provider down")])
    result = await Runner.run_chain(
        [Agent(name="a"), Agent(name="b"), Agent(name="c")], "go", model=model
    )
    assert [r.agent for r in result.runs] == ["a", "b"]
    assert result.stop_reason is StopReason.ERROR


def test_registry_rejects_duplicates_and_lists_metadata_only() -> None:
    triage, refunds = make_pair()
    registry = AgentRegistry([triage, refunds])
    with pytest.raises(UsageError, match="'refunds' is already registered"):
        registry.register(Agent(name="refunds"))
    listed = registry.list()
    assert [(i.id, i.description, i.tools, i.handoffs) for i in listed] == [
        ("triage", "", ["transfer_to_refunds"], ["refunds"]),
        ("refunds", "Handles refunds.", ["order_status"], []),
    ]
    with pytest.raises(UsageError, match="no agent 'legal'"):
        registry.get("legal")


async def test_three_agent_example_shows_handoffs_context_diffs_and_memory_decisions() -> None:
    path = Path(__file__).parent.parent / "examples" / "support_desk.py"
    spec = importlib.util.spec_from_file_location("support_desk", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen: list = []
    first, second, _ = await module.run_demo([seen.append])
    assert [r.agent for r in first.runs] == ["desk", "triage", "refunds"]
    assert [r.agent for r in second.runs] == ["desk", "refunds"]
    kinds = [e.kind for e in seen]
    handoffs = [(e.from_agent, e.to_agent, e.mode) for e in seen if e.kind == "handoff"]
    assert handoffs == [
        ("desk", "triage", "router"),
        ("triage", "refunds", "tool"),
        ("desk", "refunds", "router"),
    ]
    keys = [e.key for e in seen if e.kind == "context_changed"]
    assert keys == ["desk.last_agent", "refunds.order_id", "refunds.refunded"]
    actions = [e.action for e in seen if e.kind == "memory_decision"]
    assert actions == ["truncated", "summarized"]
    assert kinds.count("run_finished") == 5
    refund = next(e for e in seen if e.kind == "tool_finished" and e.tool == "issue_refund")
    assert refund.effect == "write" and refund.result.kind == "ok"
