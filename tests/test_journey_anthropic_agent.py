"""The anthropic-SDK library desk's journeys, through the real CLI on a copy of the suite.

golden/anthropic_agent is a user's agent on the `anthropic` SDK (Anthropic's own tool loop on
the Messages API), run unchanged as a boundary target against the loopback server's
`anthropic_base_url`. Its baseline replays unchanged; a changed tool result fails the gate
naming the step and the field; a reworded system prompt and a renamed tool argument are
request drift at their paths; the HTML report, `diff` of the two evals, `replay` of a cassette
and `promote` of a stored run say the same; `--live-from-divergence` continues a diverged case
on the bundled server answering Anthropic's API as the suite's reference policy.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from agentbench.testing import OpenAICompatibleServer
from tests.framework_journeys import (
    baseline_checkout,
    change,
    copy_of,
    first_divergences,
    framework_or_skip,
    gate_against_baseline,
    reference_policy,
)
from tests.test_journeys import agentbench

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

framework_or_skip("anthropic")

SUITE = "anthropic_agent"
CASES = 6
# Dune's central branch gets a third copy: only the case that looked at the branches saw it.
COPIES = (
    '("9780441172719", "central"): {"copies": 2,',
    '("9780441172719", "central"): {"copies": 3,',
)
# Dune's central copies move to another shelf: shown to the model, not in the desk's answer.
SHELF = (
    '("9780441172719", "central"): {"copies": 2, "on_loan": 1, "shelf": "SF-HER"}',
    '("9780441172719", "central"): {"copies": 2, "on_loan": 1, "shelf": "SF-HER-2"}',
)
# place_hold(isbn, member_id) becomes place_hold(isbn, card), its schema too.
RENAMED_ARGUMENT = (
    ("def place_hold(isbn: str, member_id: str)", "def place_hold(isbn: str, card: str)"),
    ("    if member_id not in MEMBERS:", "    member_id = card\n    if member_id not in MEMBERS:"),
    ('"member_id": {"type": "string"', '"card": {"type": "string"'),
    ('"required": ["isbn", "member_id"]', '"required": ["isbn", "card"]'),
)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed checkout whose store holds one baseline eval of the suite."""
    return baseline_checkout(tmp_path_factory.mktemp("anthropic"), SUITE, CASES)


@pytest.fixture
def checkout(baseline: Path, tmp_path: Path) -> Path:
    return copy_of(baseline, tmp_path)


def test_unchanged_code_replays_unchanged(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--strict")
    assert ran.code == 0, ran.out
    assert f"unchanged: {CASES} case(s)" in ran.out
    assert "first divergence" not in ran.out


def test_a_changed_tool_result_fails_the_gate_naming_the_step_and_field(checkout: Path) -> None:
    change(checkout, SUITE, COPIES)
    ran = gate_against_baseline(checkout, SUITE)
    assert ran.code == 1, ran.out
    assert "newly failing (1):" in ran.out
    assert "anthropic_agent/two-branches (golden/anthropic_agent/cases/desk.yaml:" in ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.agent, first.kind) == (2, "library_desk", "tool_result_changed")
    assert first.what == "tool call branch_availability"
    assert "result.copies: 2 → 3" in first.details


def test_a_reworded_system_prompt_is_request_drift_at_the_system_message(checkout: Path) -> None:
    change(checkout, SUITE, ("never promise a copy", "never promise any copy"))
    ran = gate_against_baseline(checkout, SUITE, "--filter", "find-book")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "request_drift", "model call #1")
    assert first.details.strip().startswith("messages[0].content: '")
    assert "never promise any copy" in first.details


def test_a_renamed_tool_argument_is_request_drift_at_the_tools(checkout: Path) -> None:
    change(checkout, SUITE, *RENAMED_ARGUMENT)
    ran = gate_against_baseline(checkout, SUITE, "--json")
    assert ran.code == 1, ran.out
    results = ran.json()["results"]
    assert len(results) == CASES
    for result in results:  # the tools go with every call: each case drifts at its first
        diverged = result["diverged_at"]
        assert (diverged["class"], diverged["call"]) == ("request_drift", 1), result["case_id"]
        paths = [c["path"] for c in result["drifts"][0]["changes"]]
        assert "tools[2].function.parameters.properties.member_id" in paths
        assert "tools[2].function.parameters.properties.card" in paths
        assert all(p.startswith("tools[2].") for p in paths), paths


def test_report_and_diff_name_the_same_divergence(checkout: Path, tmp_path: Path) -> None:
    change(checkout, SUITE, COPIES)
    ran = gate_against_baseline(checkout, SUITE, "--json")
    assert ran.code == 1, ran.out
    current = ran.json()["eval_id"]
    named = re.search(r"eval_\w+", ran.json()["baseline"])  # "baseline eval_… (latest; …)"
    assert named is not None, ran.json()["baseline"]
    baseline = named.group()
    reports = tmp_path / "reports"
    shown = agentbench(checkout, "report", current, "--report-dir", str(reports))
    assert shown.code == 0, shown.out + shown.err
    page = (reports / current / "index.html").read_text()
    assert "two-branches" in page and "tool_result_changed" in page
    assert "result.copies: 2 → 3" in page

    diffed = agentbench(checkout, "diff", baseline, current, "--report-dir", str(reports))
    assert diffed.code == 1, diffed.out + diffed.err
    assert "first divergence — step 2 (library_desk) tool_result_changed" in diffed.out
    assert "result.copies: 2 → 3" in diffed.out


def test_replay_of_a_cassette_with_and_without_the_change(checkout: Path) -> None:
    cassette = "replays/anthropic_agent/two-branches.yaml"
    same = agentbench(checkout, "replay", cassette, "--strict")
    assert same.code == 0, same.out + same.err
    assert "behaviour unchanged: every step matches the recording" in same.out
    change(checkout, SUITE, COPIES)
    ran = agentbench(checkout, "replay", cassette)
    assert ran.code == 1, ran.out + ran.err
    assert (
        "first divergence — step 2 (library_desk) tool_result_changed: tool call "
        "branch_availability"
    ) in ran.out
    assert "result.copies: 2 → 3" in ran.out


def test_a_promoted_run_is_a_case_that_passes_then_catches_the_change(checkout: Path) -> None:
    store = checkout / ".agentbench" / "traces.duckdb"
    with duckdb.connect(str(store), read_only=True) as conn:
        (run,) = conn.execute(
            "SELECT run_id FROM runs WHERE input LIKE '%central and riverside%Dune%' "
            "OR input LIKE '%Dune%central and riverside%'"
        ).fetchone()
    promoted = agentbench(
        checkout, "promote", run, "--suite", f"golden/{SUITE}", "--id", "dune-branches-again"
    )
    assert promoted.code == 0, promoted.out + promoted.err
    case = (checkout / "golden" / SUITE / "cases" / "promoted.yaml").read_text()
    assert "id: dune-branches-again" in case
    again = ("run", f"golden/{SUITE}", "--no-report", "--filter", "dune-branches-again")
    ran = agentbench(checkout, *again)
    assert ran.code == 0, ran.out + ran.err
    change(checkout, SUITE, COPIES)
    ran = agentbench(checkout, *again)
    assert ran.code == 1, ran.out + ran.err
    assert "step 2 (library_desk) tool_result_changed" in ran.out


def test_live_from_divergence_continues_on_anthropic_s_api(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    change(checkout, SUITE, SHELF)
    reference = reference_policy(SUITE)
    with OpenAICompatibleServer(responder=reference.respond) as server:
        # The Messages API is forwarded to ANTHROPIC_BASE_URL, as the anthropic SDK's own is.
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "the-users-key")
        ran = gate_against_baseline(
            checkout,
            SUITE,
            *("--filter", "two-branches", "--live-from-divergence"),
            *("--base-url", server.base_url),
        )
        requests = list(server.requests)
    assert ran.code == 0, ran.out + ran.err
    assert "diverged at step 2 (library_desk); continued live from model call #3" in ran.out
    # Calls 1 and 2 were replayed; the third, which carried the changed result, went live on
    # Anthropic's API with the user's key, the copies it now shows in its tool_result block.
    (live,) = requests
    assert live.path == "/v1/messages"
    assert live.headers["x-api-key"] == "the-users-key"
    central = live.body["messages"][-1]["content"][0]
    assert central["type"] == "tool_result" and '"shelf": "SF-HER-2"' in central["content"]
