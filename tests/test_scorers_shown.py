"""`tool_result`, `model_shown` and `model_not_shown` on real runs, and the context a run starts
with as part of its trajectory."""

from __future__ import annotations

import pytest

from agentbench import Agent, MemoryPolicy, RunContext, Runner, ScriptedModel, ToolCall, tool
from agentbench.evals.scorers import Score, ScoreContext, ScorerConfigError, build_scorer
from agentbench.replay.diff import align
from agentbench.replay.trajectory import trajectory
from agentbench.runtime.context import Context


@tool(effect="read_only")
def read_log(service: str) -> str:
    """A service's log."""
    return "".join(f"line {n:03d}\n" for n in range(1, 401))  # 3,600 chars: cut at 2,000


@tool(effect="read_only")
def lookup(order_id: str) -> dict:
    """An order."""
    if order_id == "Z9":
        from agentbench import BusinessFailure

        raise BusinessFailure("no order 'Z9'")
    return {"order_id": order_id, "total": 42.5}


@tool(effect="write")
def start_escalation(ctx: RunContext, ticket: str) -> str:
    """Open an escalation."""
    ctx.set("ticket", ticket)
    ctx.set("token", "secret-123", scope="request")
    return "opened"


async def run(agent: Agent, script: list, input: str = "hi", **kwargs) -> ScoreContext:
    result = await Runner.run(agent, input, model=ScriptedModel(script), **kwargs)
    return ScoreContext.from_runs("case-1", input, [result])


async def score(name: str, params, ctx: ScoreContext) -> Score:
    return await build_scorer(name, params).score(ctx)


@pytest.fixture
async def orders() -> ScoreContext:
    agent = Agent(name="desk", instructions="You answer order questions.", tools=[lookup])
    return await run(
        agent,
        [
            ToolCall("lookup", {"order_id": "A1"}),
            ToolCall("lookup", {"order_id": "Z9"}),
            "A1 costs 42.5; Z9 does not exist.",
        ],
        input="What do A1 and Z9 cost?",
    )


# -- tool_result ------------------------------------------------------------------------------


async def test_tool_result_equals_the_data_of_an_ok_call(orders) -> None:
    passed = await score(
        "tool_result",
        {"name": "lookup", "call": 1, "equals": {"total": 42.5, "order_id": "A1"}},
        orders,
    )
    assert passed.passed and passed.value == 1.0
    failed = await score(
        "tool_result", {"name": "lookup", "call": 1, "equals": {"total": 40}}, orders
    )
    assert not failed.passed
    assert (
        "the 1st call of lookup: it is {order_id: A1, total: 42.5}, not {total: 40}"
        in failed.reason
    )


async def test_tool_result_reads_a_failure_as_the_model_saw_it(orders) -> None:
    last = {"name": "lookup", "call": -1}
    assert (await score("tool_result", {**last, "kind": "business_failure"}, orders)).passed
    shown = await score(
        "tool_result", {**last, "contains": "[business_failure] no order 'Z9'"}, orders
    )
    assert shown.passed, shown.reason
    assert (await score("tool_result", {**last, "equals": "no order 'Z9'"}, orders)).passed
    wrong = await score("tool_result", {**last, "kind": "ok"}, orders)
    assert not wrong.passed and "it ended business_failure, not ok" in wrong.reason


async def test_tool_result_any_call_needs_one_call_that_satisfies_everything(orders) -> None:
    # A1's result has "42.5", Z9's has "Z9": no single result has both.
    both = await score("tool_result", {"name": "lookup", "contains": ["42.5", "Z9"]}, orders)
    assert not both.passed and "any call of lookup" in both.reason
    assert (await score("tool_result", {"name": "lookup", "contains": "42.5"}, orders)).passed
    absent = await score("tool_result", {"name": "lookup", "not_contains": "Z9"}, orders)
    assert absent.passed  # the first call does not contain it


async def test_tool_result_of_a_call_that_never_happened(orders) -> None:
    third = await score("tool_result", {"name": "lookup", "call": 3, "kind": "ok"}, orders)
    assert not third.passed and third.reason == (
        "expected the 3rd call of lookup; lookup finished 2 time(s)"
    )
    other = await score("tool_result", {"name": "refund", "kind": "ok"}, orders)
    assert not other.passed and "refund finished 0 time(s)" in other.reason
    by = await score("tool_result", {"name": "lookup", "agent": "refunds", "kind": "ok"}, orders)
    assert not by.passed and "by agent refunds" in by.reason


async def test_tool_result_sees_the_truncation_marker() -> None:
    agent = Agent(name="ops", tools=[read_log])
    ctx = await run(agent, [ToolCall("read_log", {"service": "api"}), "It was cut."])
    cut = await score(
        "tool_result",
        {
            "name": "read_log",
            "contains": "line 222\nli\n…[truncated 1,600 of 3,600 chars]",
            "not_contains": "line 223",
        },
        ctx,
    )
    assert cut.passed, cut.reason


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"name": "lookup"}, "give at least one of contains, not_contains, equals or kind"),
        ({"name": "lookup", "call": 0, "kind": "ok"}, "tool_result.call: counts from 1"),
        ({"name": "lookup", "kind": "fine"}, "tool_result.kind"),
        ({"name": "lookup", "contain": "x"}, "contain"),
    ],
)
def test_tool_result_config_mistakes_are_named(params, message) -> None:
    with pytest.raises(ScorerConfigError, match=message.replace(".", r"\.")):
        build_scorer("tool_result", params)


# -- model_shown / model_not_shown ------------------------------------------------------------


async def test_model_shown_at_a_call_and_in_a_role(orders) -> None:
    system = {"value": "You answer order questions.", "role": "system"}
    assert (await score("model_shown", {**system, "call": 1}, orders)).passed
    assert (
        await score("model_shown", {"value": '"total":42.5', "call": 2, "role": "tool"}, orders)
    ).passed
    early = await score("model_shown", {"value": "no order 'Z9'", "call": 2}, orders)
    assert not early.passed
    assert early.reason.startswith("the 2nd model call did not show \"no order 'Z9'\"; it showed: ")
    last = await score(
        "model_shown", {"value": "no order 'Z9'", "call": -1, "role": "tool"}, orders
    )
    assert last.passed and last.details["found_in_calls"] == {"no order 'Z9'": [3]}
    # The model's own earlier tool calls are part of what it was shown.
    asked = await score("model_shown", {"value": 'lookup({"order_id": "A1"})', "call": 2}, orders)
    assert asked.passed, asked.reason


async def test_model_shown_any_call_partial_credit_and_case(orders) -> None:
    some = await score("model_shown", {"value": ["Z9", "refund policy"]}, orders)
    assert not some.passed and some.value == 0.5
    assert some.reason == 'any model call did not show "refund policy"'
    assert not (await score("model_shown", "WHAT DO A1", orders)).passed
    assert (await score("model_shown", {"value": "WHAT DO A1", "ignore_case": True}, orders)).passed


async def test_model_not_shown_names_the_calls_that_showed_it(orders) -> None:
    clean = await score("model_not_shown", {"value": "secret"}, orders)
    assert clean.passed and clean.reason == 'any model call did not show "secret"'
    shown = await score("model_not_shown", {"value": "Z9", "role": "tool"}, orders)
    assert not shown.passed
    assert shown.reason == (
        'expected tool messages of any model call not to show it; it showed "Z9" (call 3)'
    )
    before = await score("model_not_shown", {"value": "Z9", "role": "tool", "call": 2}, orders)
    assert before.passed


async def test_a_model_call_beyond_the_last_fails_both_ways(orders) -> None:
    for name in ("model_shown", "model_not_shown"):
        missing = await score(name, {"value": "x", "call": 4}, orders)
        assert not missing.passed
        assert missing.reason == "expected the 4th model call; the case made 3 model call(s)"
    by = await score("model_shown", {"value": "x", "call": 1, "agent": "refunds"}, orders)
    assert by.reason == (
        "expected the 1st model call by agent refunds; the case made 0 model call(s) by agent "
        "refunds (3 in all)"
    )


def test_model_shown_config_mistakes_are_named() -> None:
    with pytest.raises(ScorerConfigError, match=r"model_shown\.call: counts from 1"):
        build_scorer("model_shown", {"value": "x", "call": 0})
    with pytest.raises(ScorerConfigError, match=r"model_not_shown\.role"):
        build_scorer("model_not_shown", {"value": "x", "role": "developer"})
    with pytest.raises(ScorerConfigError, match=r"model_shown\.value"):
        build_scorer("model_shown", {"call": 1})


async def test_what_memory_left_the_model_is_what_is_scored() -> None:
    """Under a MemoryPolicy the requests hold the summary, not the exchanges it replaced;
    summarizer calls are not counted as the agent's model calls."""
    agent = Agent(
        name="notes",
        instructions="Take notes.",
        tools=[lookup],
        memory=MemoryPolicy(max_messages=5, keep_recent=1),
    )
    ctx = await run(
        agent,
        [ToolCall("lookup", {"order_id": f"A{n}"}) for n in range(1, 5)] + ["done"],
    )
    summary = await score(
        "model_shown",
        {"value": "[Summary of earlier steps, compressed by memory]", "call": -1},
        ctx,
    )
    assert summary.passed, summary.reason
    gone = await score("model_not_shown", {"value": '"A1"', "call": -1, "role": "tool"}, ctx)
    assert gone.passed, gone.reason
    kept = await score("model_shown", {"value": '"A1"', "call": -1, "role": "assistant"}, ctx)
    assert kept.passed, kept.reason
    assert not (await score("model_shown", {"value": "x", "call": 6}, ctx)).passed


# -- the context a run starts with ------------------------------------------------------------


async def test_a_handoff_start_holds_the_session_and_never_the_request_scope() -> None:
    specialist = Agent(name="specialist", reads=["desk"])
    desk = Agent(name="desk", tools=[start_escalation], handoffs=[specialist])
    ctx = await run(
        desk,
        [
            ToolCall("start_escalation", {"ticket": "T-1"}),
            ToolCall("transfer_to_specialist", {"reason": "escalate", "summary": "T-1"}),
            "The specialist has it.",
        ],
    )
    starts = [s for s in ctx.steps if s.kind == "context" and s.signature[4] == "start"]
    assert [(s.agent, s.signature[2], s.detail) for s in starts] == [
        ("specialist", "session", {"new": {"desk.ticket": "T-1"}})
    ]
    assert starts[0].label() == "context session at run start"
    assert (
        await score("model_not_shown", {"value": "secret-123", "agent": "specialist"}, ctx)
    ).passed


async def test_a_changed_start_context_is_a_divergence() -> None:
    agent = Agent(name="desk", instructions="Tier: {{ tier | default('none') }}")
    gold = await run(agent, ["ok"], context={"tier": "gold"})
    silver = await run(agent, ["ok"], context={"tier": "silver"})
    leaked = await run(agent, ["ok"], context=Context(session={"tier": "gold"}, request={"k": 1}))
    bare = await run(agent, ["ok"])
    assert not any(s.kind == "context" for s in bare.steps)  # nothing handed, no step
    changed = align(gold.steps, silver.steps)
    assert [(d.cls, d.label) for d in changed][:1] == [
        ("context_changed", "context session at run start")
    ]
    assert changed[0].old == {"tier": "gold"} and changed[0].new == {"tier": "silver"}
    extra = align(gold.steps, leaked.steps)
    assert [(d.cls, d.label) for d in extra][:1] == [("extra_step", "context request at run start")]
    assert trajectory(bare.events) == bare.steps
