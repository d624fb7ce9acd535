"""Comparing two real evals: a tiny suite recorded once, replayed before and after a change."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import orjson
import pytest

from agentbench.cli import main
from agentbench.evals.comparing.case_changes import CaseSide, budget_regressions, usage_changes
from agentbench.evals.comparing.compare import compare_evals
from agentbench.evals.comparing.compare_text import comparison_text
from agentbench.evals.comparing.gate import gate
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.running.harness import EvalRun, Harness, HarnessOptions
from agentbench.evals.suites.dataset import discover
from agentbench.replay.cassette import RecordMode
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace.store import TraceStore
from tests.weather_suite import AGENT, SUITE, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

CASES = """
- id: paris
  input: Weather in Paris?
  expect:
    - output_contains: "21"
- id: oslo
  input: Weather in Oslo?
  expect:
    - output_contains: "4 degrees"
- id: snow
  input: Will it snow in Oslo?
  xfail: no snow forecast yet
  expect:
    - output_contains: "snow: yes"
"""


def run_suite(folder: Path, store: TraceStore, **options: object) -> EvalRun:
    found = discover([folder])
    assert not found.errors, found.errors
    result = asyncio.run(Harness(store, HarnessOptions(**options)).run(found.suites))
    store.flush()
    return result


@pytest.fixture(scope="module")
def recorded_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recorded") / "mini"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "suite.yaml").write_text(SUITE)
    (folder / "cases" / "weather.yaml").write_text(CASES)
    with pytest.MonkeyPatch.context() as patch, OpenAICompatibleServer(responder=respond) as server:
        patch.setenv("OPENAI_API_KEY", "unused")
        store = TraceStore(folder.parent / "record.duckdb")
        run_suite(folder, store, live=True, record_mode=RecordMode.ALL, base_url=server.base_url)
    assert sorted(p.name for p in (folder / "cassettes").iterdir()) == [
        "oslo.yaml",
        "paris.yaml",
        "snow.yaml",
    ]
    return folder


@pytest.fixture
def suite_dir(recorded_suite: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(recorded_suite, tmp_path / "suites" / "mini"))


@pytest.fixture
def two_evals(suite_dir: Path, tmp_path: Path) -> tuple[TraceStore, EvalRun, EvalRun]:
    """A baseline replay, then a replay after the Oslo reading changed (oslo now fails)."""
    store = TraceStore(tmp_path / "evals.duckdb")
    before = run_suite(suite_dir, store)
    agent = suite_dir / "agent.py"
    agent.write_text(agent.read_text().replace('"Oslo": 4', '"Oslo": -3'))
    after = run_suite(suite_dir, store)  # the replayed answer no longer fits: request drift
    return store, before, after


def test_unchanged_code_compares_as_unchanged(suite_dir: Path, tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "same.duckdb")
    first, second = run_suite(suite_dir, store), run_suite(suite_dir, store)
    comparison = compare_evals(store, first.eval_id, second.eval_id)
    data = comparison.as_dict()
    assert [c["kind"] for c in data["cases"]] == ["unchanged"] * 3
    assert data["pass_rate"] == {"baseline": 1.0, "current": 1.0, "delta": 0.0, "ci95": [0.0, 0.0]}
    assert data["p_value"] == 1.0 and data["significant_drop"] is False
    assert data["gate"] == {"failed": False, "reasons": []}
    assert all(c["divergences"] == [] and c["steps"]["current"] == [] for c in data["cases"])


def test_a_changed_tool_makes_the_case_newly_failing(two_evals) -> None:
    store, before, after = two_evals
    comparison = compare_evals(store, before.eval_id, after.eval_id)
    data = comparison.as_dict()
    assert list(data) == [
        "baseline_eval",
        "current_eval",
        "pass_rate",
        "p_value",
        "significant_drop",
        "gate",
        "cases",
        "baseline_version",
        "replayed",
        "not_compared",
    ]
    kinds = [(c["case_id"], c["kind"]) for c in data["cases"]]
    # The xfail case drifted too, but expected failures never count: only its score moved.
    assert kinds == [("oslo", "newly_failing"), ("snow", "score_changed"), ("paris", "unchanged")]
    assert data["cases"][1]["current"]["trials"] == 0
    oslo = data["cases"][0]
    assert oslo["baseline"]["status"] == "passed" and oslo["current"]["status"] == "failed"
    assert oslo["baseline"]["passed_trials"] == 1 and oslo["current"]["passed_trials"] == 0
    assert oslo["current"]["run_id"] == next(
        o.run_id for o in after.outcomes if o.case_id == "oslo"
    )
    assert oslo["score_delta"] == pytest.approx(-1 / 3)
    assert len(oslo["reasons"]) == 1
    assert oslo["reasons"][0].startswith("request_drift: step 1 (weather) tool_result_changed")
    first = oslo["divergences"][0]
    assert first["class"] == "tool_result_changed" and first["label"] == "tool call get_weather"
    assert first["old"]["result"] == {"city": "Oslo", "celsius": 4}
    assert first["new"]["result"] == {"city": "Oslo", "celsius": -3}
    assert [s["kind"] for s in oslo["steps"]["baseline"]] == [
        "model_call",
        "tool_call",
        "model_call",
        "run_end",
    ]
    assert len(oslo["steps"]["current"]) == 4
    rate = data["pass_rate"]
    assert rate["baseline"] == 1.0 and rate["current"] == 0.5 and rate["delta"] == -0.5
    low, high = rate["ci95"]
    assert low <= rate["delta"] <= high <= 0.0
    assert data["p_value"] == 1.0  # one discordant case out of two: no evidence of a trend
    assert data["gate"]["failed"] is True
    (reason,) = data["gate"]["reasons"]
    assert reason.startswith(
        f"mini/oslo ({oslo_source(after)}) passed in the baseline and fails now: "
        "request_drift: step 1 (weather) tool_result_changed"
    )
    assert reason.endswith("…") and len(reason.partition(" fails now: ")[2]) == 160  # cut


def oslo_source(run: EvalRun) -> str:
    return next(o.source for o in run.outcomes if o.case_id == "oslo")


def test_comparison_text_names_the_failing_case_and_its_first_divergence(two_evals) -> None:
    store, before, after = two_evals
    text = comparison_text(compare_evals(store, before.eval_id, after.eval_id))
    assert f"compare {before.eval_id} → {after.eval_id}: 3 cases" in text
    assert "pass rate 100.0% → 50.0% (−50.0 points; 95% CI [" in text
    assert (
        f"newly failing (1):\n  mini/oslo ({oslo_source(after)}): passed 1/1 → 0/1 trials, "
        "score 1.00 → 0.67" in text
    )
    assert "\n    - request_drift: step 1 (weather) tool_result_changed" in text
    assert "first divergence — step 1 (weather) tool_result_changed: tool call get_weather" in text
    assert "gate: FAILED\n  - mini/oslo (" in text
    assert "score changes (1):\n  mini/snow: xfailed → xfailed, score 0.50 → 0.33" in text


def test_diff_of_two_evals_exits_1_when_the_gate_fails(two_evals, tmp_path: Path, capsys) -> None:
    store, before, after = two_evals
    db = str(store.path)
    reports = str(tmp_path / "reports")
    capsys.readouterr()
    code = main(["diff", before.eval_id, after.eval_id, "--db", db, "--report-dir", reports])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "newly failing (1):" in out and "gate: FAILED" in out
    assert main(["diff", before.eval_id, before.eval_id, "--db", db, "--report-dir", reports]) == 0
    assert "gate: passed" in capsys.readouterr().out
    assert (
        main(["diff", before.eval_id, after.eval_id, "--json", "--db", db, "--report-dir", reports])
        == 1
    )
    data = orjson.loads(capsys.readouterr().out)
    assert data["cases"][0]["kind"] == "newly_failing" and data["gate"]["failed"] is True


def test_diff_of_an_eval_and_a_run_is_a_usage_error(two_evals, capsys) -> None:
    store, before, _ = two_evals
    run_id = before.outcomes[0].run_id
    assert main(["diff", before.eval_id, run_id, "--db", str(store.path)]) == 2
    assert "is an eval but" in capsys.readouterr().err


def test_diff_of_two_runs_still_aligns_them(two_evals, capsys) -> None:
    store, before, after = two_evals
    run_a = next(o.run_id for o in before.outcomes if o.case_id == "oslo")
    run_b = next(o.run_id for o in after.outcomes if o.case_id == "oslo")
    assert main(["diff", run_a, run_b, "--db", str(store.path)]) == 1
    assert "first difference — step 1 (weather) tool_result_changed" in capsys.readouterr().out


def test_unknown_eval_is_a_usage_error(two_evals) -> None:
    from agentbench.errors import UsageError

    store, before, _ = two_evals
    with pytest.raises(UsageError, match="no eval 'eval_nope'"):
        compare_evals(store, before.eval_id, "eval_nope")


# -- constructed evals: flaky, budget, score, added, removed and the ordering -----------------


def store_eval(
    store: TraceStore, eval_id: str, outcomes: list[TrialOutcome], version: str = "0" * 40
) -> None:
    """An eval and its results written straight into the tables, in one transaction."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    with store.writing() as conn:
        conn.execute(
            "INSERT INTO evals (eval_id, suite, started_at, finished_at, status, code_version) "
            "VALUES (?, 's', ?, ?, 'finished', ?)",
            [eval_id, now, now, version],
        )
        conn.executemany(
            "INSERT INTO results (eval_id, suite, case_id, trial, run_id, status, passed, score, "
            "scores, duration_ms, tokens, cost_usd, error, source, tags, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', ?)",
            [
                [
                    eval_id,
                    o.suite,
                    o.case_id,
                    o.trial,
                    o.run_id,
                    o.status,
                    o.passed,
                    o.score,
                    orjson.dumps(o.scores).decode(),
                    o.duration_ms,
                    o.tokens,
                    o.cost_usd,
                    o.error,
                    o.source,
                    now,
                ]
                for o in outcomes
            ],
        )


def trial(case: str, status: str, n: int = 1, **fields: object) -> TrialOutcome:
    passed = status in ("passed", "xpassed")
    scores = [
        {
            "name": "check",
            "value": 1.0 if passed else 0.0,
            "passed": passed,
            "reason": "ok" if passed else f"{case} is wrong",
        }
    ]
    values = {"score": 1.0 if passed else 0.0, "tokens": 100, "duration_ms": 100.0, **fields}
    return TrialOutcome("s", case, n, status, scores=scores, **values)  # type: ignore[arg-type]


def test_kinds_and_their_order(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "made.duckdb")
    store_eval(
        store,
        "eval_base",
        [
            trial("a-unchanged", "passed"),
            trial("b-newly-passing", "failed"),
            trial("c-flaky", "passed", 1),
            trial("c-flaky", "passed", 2),
            trial("d-tokens", "passed"),
            trial("e-score", "failed", score=0.2),
            trial("f-removed", "passed"),
            trial("g-could-not-run", "passed"),
            trial("g-newly-failing", "passed"),
            trial("h-slow-but-noise", "passed", duration_ms=100.0),
            trial("i-xfail", "xfailed"),
        ],
    )
    store_eval(
        store,
        "eval_cur",
        [
            trial("a-unchanged", "passed"),
            trial("b-newly-passing", "passed"),
            trial("c-flaky", "passed", 1),
            trial("c-flaky", "failed", 2),
            trial("d-tokens", "passed", tokens=130, cost_usd=None),
            trial("e-score", "failed", score=0.6),
            trial("g-could-not-run", "error", error="cassette missing"),
            trial("g-newly-failing", "failed"),
            trial("h-slow-but-noise", "passed", duration_ms=400.0),
            trial("i-xfail", "xfailed"),
            trial("z-added", "passed"),
        ],
    )
    comparison = compare_evals(store, "eval_base", "eval_cur", budget_pct=20.0)
    kinds = [(c.case_id, c.kind) for c in comparison.cases]
    assert kinds == [
        ("g-could-not-run", "could_not_run"),  # an error says nothing of the code: not failing
        ("g-newly-failing", "newly_failing"),
        ("d-tokens", "budget_regression"),
        ("e-score", "score_changed"),
        ("c-flaky", "flaky"),
        ("b-newly-passing", "newly_passing"),
        ("z-added", "added"),
        ("f-removed", "removed"),
        ("a-unchanged", "unchanged"),
        ("h-slow-but-noise", "unchanged"),  # +300 ms is under the 500 ms latency floor
        ("i-xfail", "unchanged"),
    ]
    by_id = {c.case_id: c for c in comparison.cases}
    # Both replayed, but these results have no traces: the recorded usage is not known.
    assert by_id["d-tokens"].reasons == [
        "tokens 100 → 130 (+30%, budget +20%)",
        "the two evals replayed recordings whose usage differs (or is not known): reported, "
        "not gated",
    ]
    assert by_id["d-tokens"].same_recorded_usage is False
    assert by_id["e-score"].score_delta == pytest.approx(0.4)
    assert by_id["g-could-not-run"].reasons == ["cassette missing"]
    assert by_id["g-could-not-run"].current.status == "error"
    assert by_id["c-flaky"].current.status == "flaky"
    assert by_id["i-xfail"].current.trials == 0  # expected failures never count
    assert by_id["f-removed"].current is None and by_id["z-added"].baseline is None
    # the flaky case passed in the baseline and fails a trial now: reported, not gating
    failed, reasons = gate(comparison, fail_under=None)
    assert failed and reasons == [
        "s/g-could-not-run passed in the baseline and could not run now: cassette missing.",
        "s/g-newly-failing passed in the baseline and fails now: check: g-newly-failing is wrong.",
    ]
    # a caller that reports the error itself (the verdict) is not told it again
    said = gate(comparison, fail_under=None, said={("s", "g-could-not-run")})[1]
    assert said == reasons[1:]
    # trial-weighted rates over the counted trials of the cases both evals ran (f-removed and
    # z-added move neither side): baseline 7 of 9 passed, current 5 of 9
    assert comparison.baseline_rate == pytest.approx(7 / 9)
    assert comparison.current_rate == pytest.approx(5 / 9)


def test_a_baseline_that_could_not_run_a_case_excuses_nothing(tmp_path: Path) -> None:
    # The baseline's live model was down: its cases errored. A case failing now is not
    # "already failing" there: the baseline never ran it.
    store = TraceStore(tmp_path / "outage.duckdb")
    down = "case 'a': the live model failed, so this trial says nothing about the code"
    store_eval(store, "eval_base", [trial("a", "error", error=down), trial("b", "failed")])
    store_eval(store, "eval_cur", [trial("a", "failed"), trial("b", "failed")])
    comparison = compare_evals(store, "eval_base", "eval_cur")
    failed, reasons = gate(comparison, fail_under=None)
    assert failed and reasons == [
        "s/a fails now, and the baseline could not run it either: check: a is wrong."
    ]  # b failed in a clean baseline too: known, reported elsewhere


def test_a_cost_change_is_shown_with_the_digits_that_show_it() -> None:
    def side(cost: float) -> CaseSide:
        return CaseSide("passed", 1.0, 1, 1, 100.0, cost, 10.0, None)

    before, after = side(0.000_31), side(0.000_332)
    assert usage_changes(before, after) == ["cost $0.00031 → $0.00033 (+7%)"]
    over = budget_regressions(before, side(0.000_4), budget_pct=20.0, latency_floor_ms=500.0)
    assert over == ["cost $0.0003 → $0.0004 (+29%, budget +20%)"]
    assert usage_changes(side(1.5), side(1.25)) == ["cost $1.5000 → $1.2500 (-17%)"]


def test_gate_fail_under_and_no_comparison(tmp_path: Path) -> None:
    assert gate(None, fail_under=0.9, current_pass_rate=0.85) == (
        True,
        ["The pass rate 85.0% is under the required 90.0%."],
    )
    assert gate(None, fail_under=0.8, current_pass_rate=0.85) == (False, [])
    assert gate(None, fail_under=None, current_pass_rate=0.1) == (False, [])


def test_significant_drop_gates_with_its_numbers(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "drop.duckdb")
    names = [f"c{i:02d}" for i in range(12)]
    # 7 cases were flaky-free passes and now fail in one of two trials: flaky, not gating
    # one by one, yet together a significant drop (7 worse, 0 better: p = 2/128).
    base = [trial(n, "passed", t) for n in names for t in (1, 2)]
    cur = [
        trial(n, "failed" if n < "c07" and t == 2 else "passed", t) for n in names for t in (1, 2)
    ]
    store_eval(store, "eval_b", base)
    store_eval(store, "eval_c", cur)
    comparison = compare_evals(store, "eval_b", "eval_c")
    assert [c.kind for c in comparison.cases[:7]] == ["flaky"] * 7
    assert comparison.p_value == pytest.approx(2 / 2**7)
    assert comparison.delta == pytest.approx(17 / 24 - 1)
    assert comparison.significant_drop
    low, high = comparison.ci95
    assert low <= comparison.delta <= high < 0
    failed, reasons = gate(comparison, fail_under=0.9)
    assert failed
    assert reasons[0] == "The pass rate 70.8% is under the required 90.0%."
    assert reasons[1].startswith(
        "The pass rate dropped significantly, 100.0% → 70.8% (−29.2 points"
    )
    assert "sign test p = 0.0156 over 12 paired cases" in reasons[1]
    assert comparison.as_dict()["gate"]["failed"] is True


def test_suites_only_one_eval_ran_are_named_not_compared(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "suites.duckdb")
    base = [trial("a", "passed"), trial("b", "passed")]
    other = [
        TrialOutcome(suite="other", case_id=c, trial=1, status="passed", score=1.0)
        for c in ("x", "y")
    ]
    store_eval(store, "eval_base", [*base, *other])
    store_eval(store, "eval_cur", [trial("a", "passed"), trial("b", "failed")])
    comparison = compare_evals(store, "eval_base", "eval_cur")
    # the suite this eval did not run is not "removed" case by case, nor in the rates
    assert [(c.suite, c.case_id, c.kind) for c in comparison.cases] == [
        ("s", "b", "newly_failing"),
        ("s", "a", "unchanged"),
    ]
    assert comparison.suites_only_in_baseline == ["other"]
    assert comparison.baseline_rate == 1.0 and comparison.current_rate == 0.5
    text = comparison_text(comparison)
    assert "suites only in the baseline (not run now, not compared): other" in text


def test_failures_no_clean_baseline_excuses_fail_the_gate(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "excuses.duckdb")
    base = [trial("known", "failed"), trial("fine", "passed")]
    now = [trial("known", "failed"), trial("fine", "passed"), trial("new", "failed")]
    store_eval(store, "eval_clean", base)
    store_eval(store, "eval_dirty", base, version="0" * 40 + "+dirty")
    store_eval(store, "eval_cur", now)
    # A clean baseline excuses a case it failed too; nothing excuses a new failing case.
    clean = compare_evals(store, "eval_clean", "eval_cur")
    assert clean.gate_failed and clean.gate_reasons == [
        "s/new fails and is not in the baseline: check: new is wrong."
    ]
    # A dirty baseline may be this very change evaluated before it was committed.
    dirty = compare_evals(store, "eval_dirty", "eval_cur")
    assert dirty.baseline_dirty
    assert [r.split(" ", 1)[0] for r in dirty.gate_reasons] == ["s/new", "s/known"]
    assert "the baseline ran uncommitted code" in dirty.gate_reasons[1]
