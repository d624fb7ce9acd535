"""Built-in scorers on real runs: verdicts, partial credit, and reasons a CI log reader follows."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.evals.scorers import SCORERS, Score, ScoreContext, ScorerConfigError, build_scorer


@tool(effect="read_only")
def get_weather(city: str, unit: str = "c") -> dict:
    """Current weather of a city."""
    return {"city": city, "celsius": 21, "unit": unit}


@tool(effect="read_only")
def order_status(order_id: str) -> str:
    """Status of an order."""
    return f"{order_id}: delivered"


async def run_case(script: list, *, input: str = "hi") -> ScoreContext:
    refunds = Agent(name="refunds", description="Handles refunds.", tools=[order_status])
    triage = Agent(name="triage", handoffs=[refunds], tools=[get_weather])
    result = await Runner.run(triage, input, model=ScriptedModel(script))
    return ScoreContext.from_runs("case-1", input, [result], duration_ms=1200.0)


@pytest.fixture
async def ctx() -> ScoreContext:
    """Triage checks the weather in Oslo, hands off to refunds, which looks up order A1."""
    return await run_case(
        [
            ToolCall("get_weather", {"city": "Oslo"}),
            ToolCall("transfer_to_refunds", {"reason": "refund", "summary": "A1"}),
            ToolCall("order_status", {"order_id": "A1"}),
            "It is 21 °C in Oslo; order A1 was delivered.",
        ]
    )


async def score(name: str, params, ctx: ScoreContext) -> Score:
    return await build_scorer(name, params).score(ctx)


def with_output(ctx: ScoreContext, output) -> ScoreContext:
    return dataclasses.replace(ctx, output=output)


def test_the_registry_holds_exactly_the_documented_types() -> None:
    assert {
        "output_equals",
        "output_contains",
        "output_not_contains",
        "output_regex",
        "output_json_schema",
        "output_number",
        "tool_called",
        "tool_not_called",
        "trajectory",
        "stop_reason",
        "max_steps",
        "token_budget",
        "cost_budget",
        "latency_budget",
        "fallback",
        "llm_judge",
        "custom",
    } <= set(SCORERS)


async def test_context_totals_every_run_of_every_turn(ctx) -> None:
    assert [run.agent for run in ctx.runs] == ["triage", "refunds"]
    assert ctx.usage.total_tokens == sum(run.usage.total_tokens for run in ctx.runs)
    assert ctx.usage.total_tokens > ctx.result.usage.total_tokens  # not just the last run
    assert ctx.output == ctx.result.output and ctx.result.agent == "refunds"
    assert [s.kind for s in ctx.steps].count("handoff") == 1
    assert ctx.events[-1].kind == "run_finished"


# -- output ------------------------------------------------------------------------------
async def test_output_equals_text_and_data(ctx) -> None:
    text = "It is 21 °C in Oslo; order A1 was delivered."
    assert (await score("output_equals", f"  {text}\n", ctx)).passed  # strip by default
    wrong = await score("output_equals", text.lower(), ctx)
    assert not wrong.passed
    assert wrong.reason.startswith(f'expected output "{text.lower()}"; got "{text}"')
    assert "differ only in case" in wrong.reason
    assert (await score("output_equals", {"value": text.upper(), "ignore_case": True}, ctx)).passed

    data = with_output(ctx, '{"b": [1, 2], "a": "x"}')  # JSON text equals data, any key order
    assert (await score("output_equals", {"value": {"a": "x", "b": [1, 2]}}, data)).passed
    off = await score("output_equals", {"value": {"a": "y"}}, data)
    assert off.reason == "expected output {a: y}; got {a: x, b: [1, 2]}"


async def test_output_contains_gives_partial_credit(ctx) -> None:
    half = await score("output_contains", ["21 °C", "Paris"], ctx)
    assert (half.passed, half.value) == (False, 0.5)
    assert half.reason.startswith('output contains "21 °C" but not "Paris"; output: "It is')
    anyone = await score("output_contains", {"value": ["Paris", "Oslo"], "mode": "any"}, ctx)
    assert anyone.passed and anyone.reason == 'output contains "Oslo"'
    assert (await score("output_contains", {"value": "OSLO", "ignore_case": True}, ctx)).passed


async def test_output_not_contains_shows_where(ctx) -> None:
    assert (await score("output_not_contains", ["sorry", "cannot"], ctx)).passed
    found = await score("output_not_contains", ["sorry", "delivered"], ctx)
    assert (found.passed, found.value) == (False, 0.5)
    assert found.reason.startswith('output contains "delivered": …"')


async def test_output_regex(ctx) -> None:
    matched = await score("output_regex", {"pattern": r"order (a\d)", "flags": "i"}, ctx)
    assert matched.passed and matched.details["groups"] == ["A1"]
    assert matched.reason == 'output matches /order (a\\d)/i at "order A1"'
    missed = await score("output_regex", r"^\d+$", ctx)
    assert not missed.passed and missed.reason.startswith("output does not match /^\\d+$/")
    with pytest.raises(ScorerConfigError, match=r"output_regex\.pattern: not a valid regular"):
        build_scorer("output_regex", "(")


class Forecast(BaseModel):
    city: str
    celsius: float


async def test_output_json_schema_accepts_models_dicts_and_text(ctx) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
    }
    params = {"schema": schema}
    assert (
        await score(
            "output_json_schema", params, with_output(ctx, Forecast(city="Oslo", celsius=3))
        )
    ).passed
    assert (
        await score("output_json_schema", params, with_output(ctx, {"city": "Oslo", "celsius": 3}))
    ).passed
    fenced = with_output(ctx, 'Here:\n```json\n{"city": "Oslo", "celsius": 3}\n```\n')
    found = await score("output_json_schema", params, fenced)
    assert found.passed and "read from a ```json block" in found.reason
    bad = await score(
        "output_json_schema", params, with_output(ctx, {"city": "Oslo", "celsius": "hot"})
    )
    assert not bad.passed
    assert bad.reason == (
        "output does not match the schema: at output.celsius: 'hot' is not of type 'number'"
    )
    prose = await score("output_json_schema", params, ctx)
    assert prose.reason.startswith("the output is not JSON and contains no JSON object")
    with pytest.raises(ScorerConfigError, match="not a valid JSON Schema"):
        build_scorer("output_json_schema", {"schema": {"type": "objekt"}})


async def test_output_number_reads_the_first_number_and_says_so(ctx) -> None:
    read = await score("output_number", {"value": 21, "tolerance": 0.5}, ctx)
    assert read.passed
    assert read.reason == (
        'output is 21 (the first number in the text "It is 21 °C in Oslo; order A1 was '
        'delivered."); expected 21 ± 0.5'
    )
    thousands = with_output(ctx, "Revenue was 1,234.5 USD")
    assert (await score("output_number", {"value": 1230, "relative": 0.01}, thousands)).passed
    off = await score("output_number", 1200, thousands)
    assert not off.passed and "off by 34.5" in off.reason
    assert (await score("output_number", 3, with_output(ctx, 3.0))).passed
    none = await score("output_number", 3, with_output(ctx, "no digits here"))
    assert none.reason == 'expected the number 3; the output has no number: "no digits here"'


async def test_no_output_says_how_the_run_ended() -> None:
    ctx = await run_case([RuntimeError("provider down")])
    missing = await score("output_contains", "x", ctx)
    assert not missing.passed
    assert missing.reason.startswith("the run produced no output (stop reason error: ")


# -- tools -------------------------------------------------------------------------------
async def test_tool_called_names_the_expected_and_the_actual_call(ctx) -> None:
    wrong = await score("tool_called", {"name": "get_weather", "args": {"city": "Paris"}}, ctx)
    assert not wrong.passed
    assert wrong.reason == (
        "expected tool get_weather with {city: Paris}; called get_weather with "
        "{city: Oslo} (city: expected Paris, got Oslo)"
    )
    assert (
        await score("tool_called", {"name": "get_weather", "args": {"city": "Oslo"}}, ctx)
    ).passed
    assert (await score("tool_called", "get_weather", ctx)).reason == "called get_weather once"


async def test_tool_called_match_modes_ignore_and_times() -> None:
    ctx = await run_case(
        [
            ToolCall("get_weather", {"city": "Oslo", "unit": "f"}),
            ToolCall("get_weather", {"city": "Oslo", "unit": "c"}),
            "done",
        ]
    )
    exact = {"name": "get_weather", "args": {"city": "Oslo"}, "match": "exact"}
    failed = await score("tool_called", exact, ctx)
    assert not failed.passed and "unexpected unit: f" in failed.reason
    assert (await score("tool_called", {**exact, "ignore": ["unit"]}, ctx)).passed
    twice = await score(
        "tool_called", {"name": "get_weather", "args": {"city": "Oslo"}, "times": 2}, ctx
    )
    assert twice.passed and twice.reason == "called get_weather with {city: Oslo} 2 times"
    thrice = await score("tool_called", {"name": "get_weather", "times": 3}, ctx)
    assert thrice.reason == "expected get_weather 3 times; it was called 2 times"


async def test_tool_called_by_agent_after_a_handoff(ctx) -> None:
    assert (await score("tool_called", {"name": "order_status", "agent": "refunds"}, ctx)).passed
    wrong = await score("tool_called", {"name": "order_status", "agent": "triage"}, ctx)
    assert wrong.reason == (
        "expected tool order_status by agent triage; order_status was called only by agent refunds"
    )
    never = await score("tool_called", "search", ctx)
    assert never.reason == (
        "expected tool search; search was never called (called: get_weather, "
        "transfer_to_refunds, order_status)"
    )


async def test_rejected_calls_are_mentioned_but_never_count() -> None:
    ctx = await run_case([ToolCall("get_weather", {"town": "Oslo"}), "sorry"])
    rejected = await score("tool_called", "get_weather", ctx)
    assert not rejected.passed
    assert rejected.reason.endswith("1 call(s) were rejected: invalid_arguments")


async def test_tool_not_called(ctx) -> None:
    assert (await score("tool_not_called", "search", ctx)).reason == "search was not called"
    other_args = await score(
        "tool_not_called", {"name": "get_weather", "args": {"city": "Paris"}}, ctx
    )
    assert other_args.passed and other_args.reason.endswith("(called with {city: Oslo})")
    called = await score("tool_not_called", "get_weather", ctx)
    assert called.reason == (
        "expected no call to get_weather; it was called once, first by agent triage with "
        "{city: Oslo}"
    )


# -- trajectory --------------------------------------------------------------------------
FULL = [
    {"tool": "get_weather", "args": {"city": "Oslo"}},
    {"handoff": "refunds"},
    {"tool": "order_status", "agent": "refunds"},
]


async def test_trajectory_strict_full_match_with_handoffs(ctx) -> None:
    matched = await score("trajectory", FULL, ctx)
    assert matched.passed and matched.value == 1.0
    assert matched.reason == (
        "trajectory matches (strict): get_weather {city: Oslo} → handoff triage→refunds → "
        "order_status {order_id: A1}"
    )


async def test_trajectory_strict_names_the_first_divergence(ctx) -> None:
    swapped = [FULL[0], {"tool": "order_status"}, {"handoff": "refunds"}]
    result = await score("trajectory", swapped, ctx)
    assert (result.passed, round(result.value, 2)) == (False, 0.67)
    assert "step 2: expected order_status, got handoff triage→refunds" in result.reason


async def test_trajectory_attribution_by_agent(ctx) -> None:
    wrong_agent = [FULL[0], FULL[1], {"tool": "order_status", "agent": "triage"}]
    assert not (await score("trajectory", wrong_agent, ctx)).passed


@pytest.mark.parametrize(
    ("mode", "expected", "value", "passed"),
    [
        ("unordered", [FULL[2], FULL[1], FULL[0]], 1.0, True),
        ("unordered", [FULL[2], FULL[0]], 2 / 3, False),
        ("superset", [FULL[2], FULL[0]], 1.0, True),
        ("superset", [FULL[0], {"tool": "search"}], 0.5, False),
        ("subset", [*FULL, {"tool": "search"}], 1.0, True),
        ("subset", [FULL[0]], 1 / 3, False),
    ],
)
async def test_trajectory_modes(ctx, mode, expected, value, passed) -> None:
    result = await score("trajectory", {"expected": expected, "mode": mode}, ctx)
    assert (result.passed, result.value) == (passed, pytest.approx(value))


async def test_trajectory_reasons_for_set_modes(ctx) -> None:
    missing = await score("trajectory", {"expected": [{"tool": "search"}], "mode": "superset"}, ctx)
    assert "missing search" in missing.reason
    extra = await score("trajectory", {"expected": [FULL[0]], "mode": "subset"}, ctx)
    assert "unexpected handoff triage→refunds, order_status {order_id: A1}" in extra.reason


async def test_trajectory_threshold_and_routing_tools(ctx) -> None:
    partial = {"expected": [FULL[0], {"tool": "search"}], "mode": "superset", "threshold": 0.5}
    assert (await score("trajectory", partial, ctx)).passed
    # Naming the routing tool puts it back in the actual trajectory.
    with_tool = [FULL[0], {"tool": "transfer_to_refunds"}, FULL[1], FULL[2]]
    assert (await score("trajectory", with_tool, ctx)).passed


# -- outcome and budgets -----------------------------------------------------------------
async def test_stop_reason(ctx) -> None:
    assert (await score("stop_reason", None, ctx)).reason == "stop reason completed"
    wrong = await score("stop_reason", ["max_iterations", "timeout"], ctx)
    assert wrong.reason == (
        "expected stop reason max_iterations or timeout; agent refunds stopped with completed"
    )
    with pytest.raises(ScorerConfigError, match=r"did you mean 'completed'"):
        build_scorer("stop_reason", "complete")


async def test_max_steps_total_and_per_run(ctx) -> None:
    assert (await score("max_steps", 4, ctx)).reason == "4 model calls (max 4)"
    over = await score("max_steps", 2, ctx)
    assert (over.passed, over.value, over.reason) == (False, 0.5, "4 model calls; the budget is 2")
    per_run = await score("max_steps", {"max": 10, "per_run": 1}, ctx)
    assert per_run.reason == "agent triage made 2 model calls in one run; at most 1 allowed per run"


async def test_max_steps_min_catches_a_run_stopped_early(ctx) -> None:
    assert (await score("max_steps", {"min": 4, "max": 4}, ctx)).passed
    under = await score("max_steps", {"min": 5, "max": 6}, ctx)
    assert (under.passed, under.value) == (False, 0.8)
    assert under.reason == "4 model calls; at least 5 expected"
    with pytest.raises(ScorerConfigError, match=r"min \(3\) is more than max \(2\)"):
        build_scorer("max_steps", {"min": 3, "max": 2})


async def test_token_budget(ctx) -> None:
    total = ctx.usage.total_tokens
    assert (await score("token_budget", total, ctx)).passed
    over = await score("token_budget", {"max_output_tokens": 1}, ctx)
    assert not over.passed
    assert over.reason == f"{ctx.usage.output_tokens:,} output tokens used; the budget is 1"
    with pytest.raises(ScorerConfigError, match="give max_tokens"):
        build_scorer("token_budget", {})


async def test_cost_budget_needs_a_known_cost(ctx) -> None:
    unknown = await score("cost_budget", 0.01, ctx)
    assert not unknown.passed and unknown.error is not None
    assert unknown.reason.startswith("the cost is unknown: the suite gives no pricing")
    priced = dataclasses.replace(ctx, cost_usd=0.002)
    assert (
        await score("cost_budget", 0.01, priced)
    ).reason == "the case cost $0.0020 (max $0.0100)"
    assert not (await score("cost_budget", 0.001, priced)).passed


async def test_latency_budget(ctx) -> None:
    assert (
        await score("latency_budget", 2000, ctx)
    ).reason == "the case took 1,200 ms (max 2,000 ms)"
    over = await score("latency_budget", 600, ctx)
    assert (over.passed, over.value) == (False, 0.5)
    per_call = await score("latency_budget", {"per_call_ms": 60_000, "percentile": 95}, ctx)
    assert per_call.passed and "p95 model call took" in per_call.reason


async def test_a_replayed_case_is_not_judged_on_this_machines_time(ctx) -> None:
    # Replayed, the model answers in microseconds: 1,200 ms is the machine (a busy CI runner).
    replayed = dataclasses.replace(ctx, replayed=True)
    for params in (600, {"per_call_ms": 0.001}):
        verdict = await score("latency_budget", params, replayed)
        assert (verdict.passed, verdict.value) == (True, 1.0)
        assert verdict.reason == (
            "not judged: the model calls were replayed, so the case's 1,200 ms measure this "
            "machine, not the agent; latency budgets are judged in --live runs"
        )
        assert verdict.details["judged"] is False


# -- the registry ------------------------------------------------------------------------
def test_unknown_scorer_lists_the_known_ones_closest_first() -> None:
    with pytest.raises(ScorerConfigError) as caught:
        build_scorer("tool_caled", {})
    assert caught.value.message.startswith(
        "unknown scorer 'tool_caled'; expected one of: tool_called, tool_not_called"
    )


def test_bad_parameters_name_the_field_and_what_was_expected() -> None:
    with pytest.raises(ScorerConfigError) as caught:
        build_scorer("tool_called", {"name": "get_weather", "args": ["Paris"]})
    assert (caught.value.field, caught.value.loc) == ("args", ("args",))
    assert str(caught.value) == "tool_called.args: expected a mapping; got ['Paris']"

    with pytest.raises(ScorerConfigError) as typo:
        build_scorer("tool_called", {"nam": "get_weather"})
    assert [p.message for p in typo.value.problems] == [
        "unknown field 'nam'; expected one of: name, args, agent, match, times, ignore",
        "missing required field 'name'",
    ]


def test_a_mapping_is_always_the_parameters() -> None:
    with pytest.raises(ScorerConfigError, match=r"write value: \{\.\.\.\}"):
        build_scorer("output_equals", {"city": "Paris"})
