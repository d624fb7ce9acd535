"""What the comparison makes visible that it used to call `unchanged`: tokens and cost moved
between replays of the same recorded usage, and an expected failure that passed (XPASS).

A tiny priced suite is recorded once against the bundled server; then it is replayed before
and after a change of the code that reads usage (the counts swapped, one token more), with a
cassette re-recorded with other usage, and live twice; and with its xfail case's scorer made
lenient. Each comparison must report what moved, and gate only what the code did.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentbench.evals.comparing.compare import compare_evals
from agentbench.evals.comparing.compare_text import comparison_text
from agentbench.evals.running.harness import EvalRun, Harness, HarnessOptions
from agentbench.evals.suites.dataset import discover
from agentbench.replay.cassette import RecordMode
from agentbench.runtime import completions
from agentbench.runtime.models import Usage
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace.store import TraceStore
from tests.weather_suite import AGENT, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

SUITE = """
name: mini
agent: agent.py:agent
model:
  name: mini-model
  pricing: {input_per_mtok: 1.0, output_per_mtok: 3.0}
cassettes: cassettes
scorers:
  - stop_reason: completed
"""
CASES = """
- id: paris
  input: Weather in Paris?
  expect:
    - output_contains: "21"
- id: snow
  input: Will it snow in Oslo?
  xfail: no snow forecast yet
  expect:
    - output_contains: "snow: "
"""
real_usage_from = completions.usage_from


def run_suite(folder: Path, store: TraceStore, **options: Any) -> EvalRun:
    found = discover([folder])
    assert not found.errors, found.errors
    result = asyncio.run(Harness(store, HarnessOptions(**options)).run(found.suites))
    store.flush()
    return result


def record(folder: Path, store: TraceStore) -> EvalRun:
    with pytest.MonkeyPatch.context() as patch, OpenAICompatibleServer(responder=respond) as server:
        patch.setenv("OPENAI_API_KEY", "unused")
        return run_suite(
            folder, store, live=True, record_mode=RecordMode.ALL, base_url=server.base_url
        )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("usage") / "mini"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "suite.yaml").write_text(SUITE)
    (folder / "cases" / "weather.yaml").write_text(CASES)
    record(folder, TraceStore(folder.parent / "record.duckdb"))
    return folder


@pytest.fixture
def suite(recorded: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(recorded, tmp_path / "suites" / "mini"))


def swapped(body: dict[str, Any] | None) -> Usage:
    """The mutation: prompt and completion token counts swapped where usage is read."""
    usage = real_usage_from(body)
    return Usage(input_tokens=usage.output_tokens, output_tokens=usage.input_tokens)


def one_more(body: dict[str, Any] | None) -> Usage:
    usage = real_usage_from(body)
    return Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens + 1)


def paris(comparison: Any) -> Any:
    return next(c for c in comparison.cases if c.case_id == "paris")


def test_swapped_token_counts_on_the_same_recording_fail_the_gate(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TraceStore(tmp_path / "e.duckdb")
    before = run_suite(suite, store)
    monkeypatch.setattr(completions, "usage_from", swapped)
    after = run_suite(suite, store)
    comparison = compare_evals(store, before.eval_id, after.eval_id)
    case = paris(comparison)
    assert case.kind == "budget_regression" and case.same_recorded_usage is True
    assert case.budget and case.budget[0].startswith("cost $")  # tokens: the same total
    assert comparison.replayed and comparison.gate_failed
    reasons = comparison.gate_reasons
    assert [r.split(" (")[0] for r in reasons] == ["mini/paris", "mini/snow"], reasons
    assert all(
        "is over budget on the same recorded usage (both evals replayed" in r for r in reasons
    )
    assert "budget regressions (gating when both evals replayed the same usage) (2):" in (
        comparison_text(comparison)
    )


def test_a_small_usage_change_is_reported_and_fails_only_with_fail_on_change(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TraceStore(tmp_path / "e.duckdb")
    before = run_suite(suite, store)
    monkeypatch.setattr(completions, "usage_from", one_more)
    after = run_suite(suite, store)
    comparison = compare_evals(store, before.eval_id, after.eval_id)
    case = paris(comparison)
    assert case.kind == "usage_changed" and case.same_recorded_usage is True
    assert case.usage[0].startswith("tokens ") and not case.budget
    assert not comparison.gate_failed
    strict = compare_evals(store, before.eval_id, after.eval_id, fail_on_change=True)
    assert strict.gate_failed
    assert (
        "changed tokens or cost on the same recorded usage (--fail-on-change)"
        in (strict.gate_reasons[0])
    )


def test_a_cassette_re_recorded_with_other_usage_is_reported_not_gated(
    suite: Path, tmp_path: Path
) -> None:
    store = TraceStore(tmp_path / "e.duckdb")
    before = run_suite(suite, store)
    cassette = suite / "cassettes" / "paris.yaml"
    text = cassette.read_text()
    assert text.count('"prompt_tokens":') >= 1, text
    cassette.write_text(text.replace('"prompt_tokens":', '"prompt_tokens":9'))
    after = run_suite(suite, store)
    comparison = compare_evals(store, before.eval_id, after.eval_id)
    case = paris(comparison)
    assert case.kind == "budget_regression" and case.same_recorded_usage is False
    assert "reported, not gated" in case.reasons[-1]
    assert not comparison.gate_failed
    assert not compare_evals(store, before.eval_id, after.eval_id, fail_on_change=True).gate_failed


def test_between_live_evals_usage_stays_report_only(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TraceStore(tmp_path / "e.duckdb")
    before = record(suite, store)
    monkeypatch.setattr(completions, "usage_from", swapped)
    after = record(suite, store)
    comparison = compare_evals(store, before.eval_id, after.eval_id)
    case = paris(comparison)
    assert not comparison.replayed and case.same_recorded_usage is None
    assert case.kind == "budget_regression" and not comparison.gate_failed
    monkeypatch.setattr(completions, "usage_from", one_more)
    again = record(suite, store)
    assert paris(compare_evals(store, before.eval_id, again.eval_id)).kind == "unchanged"


def test_an_expected_failure_that_passes_is_an_xpass(suite: Path, tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "e.duckdb")
    before = run_suite(suite, store)
    cases = suite / "cases" / "weather.yaml"
    cases.write_text(cases.read_text().replace('output_contains: "snow: "', "output_contains: O"))
    after = run_suite(suite, store)
    assert {o.case_id: o.status for o in after.outcomes}["snow"] == "xpassed"
    comparison = compare_evals(store, before.eval_id, after.eval_id)
    snow = next(c for c in comparison.cases if c.case_id == "snow")
    assert snow.kind == "xpassed" and snow.reasons[0] == "XPASS: marked xfail, and passed"
    assert (snow.baseline.status, snow.current.status) == ("xfailed", "xpassed")
    assert not comparison.gate_failed  # reported ...
    text = comparison_text(comparison)
    # diff has no --strict-xfail: the title names what gates an XPASS there
    assert (
        "XPASS: marked xfail, and passed (gating in a suite with strict_xfail: true, or under "
        "run/gate --strict-xfail) (1):"
    ) in text
    assert "mini/snow: xfailed → xpassed" in text
    strict = compare_evals(store, before.eval_id, after.eval_id, strict_xfail=True)
    assert strict.gate_failed  # ... and gating when strict
    assert (
        strict.gate_reasons[0].startswith("mini/snow (")
        and "(XPASS, strict)" in (strict.gate_reasons[0])
    )
    # the suite's own key does it too, for `diff` and `gate` alike: it is kept with the eval
    (suite / "suite.yaml").write_text(SUITE + "strict_xfail: true\n")
    keyed = run_suite(suite, store)
    assert compare_evals(store, before.eval_id, keyed.eval_id).gate_failed
