"""The pydantic-ai bank suite's journeys, through the real CLI on a copy of the suite.

golden/pydantic_ai_agent is a user's pydantic-ai agent run unchanged as a boundary target
(OpenAIChatModel on the loopback server). Its baseline replays unchanged; a changed tool
result fails the gate naming the step and the field; reworded instructions and a renamed tool
argument are request drift at their paths; `--live-from-divergence` continues a diverged case
with the live model; `agentbench bisect` finds the commit that changed a tool.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.framework_journeys import (
    baseline_checkout,
    bisect_history,
    change,
    copy_of,
    first_divergences,
    framework_or_skip,
    gate_against_baseline,
    run_live_from_divergence,
)
from tests.test_journeys import agentbench

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

framework_or_skip("pydantic_ai")

SUITE = "pydantic_ai_agent"
CASES = 6
SAVINGS = ('"balance": 8800.0, "currency": "EUR"},', '"balance": 8800.5, "currency": "EUR"},')
RENT = ('"amount": -950.0}', '"amount": -955.0}')
# account_balance(account_id) becomes account_balance(account), its docstring and body too.
RENAMED_ARGUMENT = (
    (
        "def account_balance(ctx: RunContext[Customer], account_id: str)",
        "def account_balance(ctx: RunContext[Customer], account: str)",
    ),
    ("accounts.\n\n    Args:\n        account_id:", "accounts.\n\n    Args:\n        account:"),
    (
        "    account = _own_account(ctx, account_id)\n    return {",
        "    account_id = account\n    account = _own_account(ctx, account_id)\n    return {",
    ),
)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed checkout whose store holds one baseline eval of the suite."""
    return baseline_checkout(tmp_path_factory.mktemp("pydantic-ai"), SUITE, CASES)


@pytest.fixture
def checkout(baseline: Path, tmp_path: Path) -> Path:
    return copy_of(baseline, tmp_path)


def test_unchanged_code_replays_unchanged(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--strict")
    assert ran.code == 0, ran.out
    assert f"unchanged: {CASES} case(s)" in ran.out
    assert "first divergence" not in ran.out


def test_a_changed_tool_result_fails_the_gate_naming_the_step_and_field(checkout: Path) -> None:
    change(checkout, SUITE, SAVINGS)
    ran = gate_against_baseline(checkout, SUITE)
    assert ran.code == 1, ran.out
    assert (
        "pydantic_ai_agent/balances-in-parallel (golden/pydantic_ai_agent/cases/bank.yaml:2)"
        in (ran.out)
    )
    (first,) = first_divergences(ran.out)
    assert (first.step, first.agent, first.kind) == (1, "bank_desk", "tool_result_changed")
    assert first.what.startswith("tool call account_balance")
    assert "result.balance: 8800.0 → 8800.5" in first.details


def test_reworded_instructions_are_request_drift_at_the_system_message(checkout: Path) -> None:
    change(checkout, SUITE, ("never guess balances.", "never guess a balance."))
    ran = gate_against_baseline(checkout, SUITE, "--filter", "balances-in-parallel")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "request_drift", "model call #1")
    assert first.details.strip().startswith("messages[0].content: '")
    assert "never guess a balance." in first.details


def test_a_renamed_tool_argument_is_request_drift_at_the_tools(checkout: Path) -> None:
    change(checkout, SUITE, *RENAMED_ARGUMENT)
    ran = gate_against_baseline(checkout, SUITE, "--filter", "balances-in-parallel")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "request_drift", "model call #1")
    details = first.details
    assert "tools[0].function.parameters.properties.account_id: removed" in details
    assert "tools[0].function.parameters.properties.account: added" in details


def test_live_from_divergence_continues_a_diverged_case_live(checkout: Path) -> None:
    change(checkout, SUITE, RENT)
    case = ("--filter", "transactions-then-freeze")
    replayed = gate_against_baseline(checkout, SUITE, *case, "--json")
    assert replayed.code == 1, replayed.out  # the recording's later answers no longer apply
    (result,) = replayed.json()["results"]
    assert result["status"] == "failed" and result["diverged_at"]["live_from"] is None

    ran, requests = run_live_from_divergence(checkout, SUITE, *case)
    assert ran.code == 0, ran.out + ran.err
    assert "diverged at step 1 (bank_desk); continued live from model call #2" in ran.out
    # The first call was replayed; from the second on, the live model was asked: the rest of
    # turn 1 (which now shows the changed result) and all of turn 2.
    assert len(requests) == 3
    assert '"amount":-955.0' in requests[0].body["messages"][-1]["content"]
    assert "freeze card C-77" in requests[1].body["messages"][-1]["content"]


def test_bisect_finds_the_commit_that_changed_a_tool(checkout: Path) -> None:
    shas = bisect_history(checkout, SUITE, SAVINGS)
    found = agentbench(
        checkout, "bisect", "balances-in-parallel", "--good", shas[0], "--bad", "HEAD",
        "--suite", f"golden/{SUITE}",
    )  # fmt: skip
    assert found.code == 0, found.out + found.err
    assert f"  {shas[1]}  the changed tool" in found.out
    assert f"compared with the commit before it, {shas[0][:12]}: newly_failing" in found.out
    assert "first divergence — step 1 (bank_desk) tool_result_changed" in found.out
    assert "result.balance: 8800.0 → 8800.5" in found.out
