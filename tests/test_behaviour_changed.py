"""Every case's behaviour is compared, not only cases whose scores moved (issue 14).

Through the real CLI on a committed copy of three golden suites with one baseline eval: a change
that alters the trajectory but no score is `behaviour_changed` (with its first divergence) in
`run --baseline`, `diff`, `--json`, the markdown summary, the HTML report and the GitHub
annotations; it gates only under `--fail-on-change`. An unchanged rerun has no such case; at
one position a cause is named before the request drift it caused; every turn of a multi-turn
case is aligned; and a slower replayed run is not a latency budget regression.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench.evals.comparing.compare import compare_evals
from agentbench.replay.convert import stored_trajectory
from agentbench.replay.diff import Divergence, by_cause
from agentbench.trace.store import TraceStore
from tests.test_compare_evals import store_eval, trial
from tests.test_journeys import ROOT, Result, _generated, agentbench, apply, edit, git

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

SUITES = ("brakes", "customer_service", "sre")
# Refunds keep a little more in the session context; no tool result, request or score changes.
RECORD_ORDER = edit(
    "    issued[idempotency_key] = refund\n",
    '    issued[idempotency_key] = {**refund, "order_id": order_id.upper()}\n',
)
REFUNDS = {"refund-eligible", "refund-large-gold", "refund-retried-idempotently"}
MULTI_TURN = "refund-follow-up"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A committed checkout of three suites and their cassettes, with one baseline eval."""
    checkout = tmp_path_factory.mktemp("behaviour") / "repo"
    golden = checkout / "golden"
    for suite in SUITES:
        shutil.copytree(ROOT / "golden" / suite, golden / suite, ignore=_generated)
        shutil.copytree(ROOT / "replays" / suite, checkout / "replays" / suite)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, golden / name)
    shutil.copytree(ROOT / "schema", checkout / "schema")
    (checkout / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n*.duckdb\n")
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", "suites")
    first = agentbench(checkout, "run", "golden/", "--json", "--no-report")
    assert first.code == 0, first.err + first.out
    return checkout, first.json()["eval_id"]


@pytest.fixture
def checkout(baseline: tuple[Path, str], tmp_path: Path) -> Path:
    return Path(shutil.copytree(baseline[0], tmp_path / "repo", symlinks=True))


def cases_of(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["case_id"]: c for c in document["cases"]}


def kinds(document: dict[str, Any]) -> dict[str, str]:
    return {c["case_id"]: c["kind"] for c in document["cases"] if c["kind"] != "unchanged"}


def run_json(checkout: Path, *args: str) -> tuple[Result, dict[str, Any]]:
    ran = agentbench(checkout, "run", *args, "--json")
    assert "Traceback" not in ran.err, ran.err
    return ran, ran.json()


def test_same_scores_changed_trajectory_is_behaviour_changed(
    checkout: Path, baseline: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, baseline_id = baseline
    apply(checkout, "customer_service", (RECORD_ORDER,))
    summary = checkout / "summary.md"
    ran, document = run_json(
        checkout, "golden/customer_service", "--baseline", "latest", "--summary-md", str(summary)
    )
    assert ran.code == 0, ran.err + ran.out  # reported, not gating
    comparison = document["comparison"]
    assert comparison["baseline_eval"] == baseline_id and not comparison["gate"]["failed"]
    assert kinds(comparison) == dict.fromkeys(REFUNDS | {MULTI_TURN}, "behaviour_changed")
    case = cases_of(comparison)["refund-eligible"]
    assert case["baseline"]["score"] == case["current"]["score"] == 1.0
    first = case["divergences"][0]
    assert (first["class"], first["step"], first["agent"]) == ("context_changed", 2, "refunds")
    assert first["label"] == "context session:refunds.issued (add)"
    assert case["steps"]["baseline"] and case["steps"]["current"]  # shown side by side
    current_eval = document["eval_id"]

    # the markdown summary and the HTML report both list it, with its first divergence
    markdown = summary.read_text()
    assert "#### Behaviour changed, scores equal" in markdown
    assert "`customer_service/refund-eligible`" in markdown and "context_changed" in markdown
    page = Path(document["report"]).read_text()
    assert "Behaviour changed (scores equal)" in page
    assert 'data-kind="behaviour_changed"' in page and "refund-eligible" in page

    # `diff` of the two evals says the same in text, and exits 0 unless --fail-on-change
    diff = agentbench(checkout, "diff", baseline_id, current_eval)
    assert diff.code == 0, diff.err + diff.out
    assert "behaviour changed, scores equal (gating only with --fail-on-change) (4):" in diff.out
    assert "first divergence — step 2 (refunds) context_changed" in diff.out
    strict = agentbench(checkout, "diff", baseline_id, current_eval, "--fail-on-change", "--json")
    assert strict.code == 1, strict.err + strict.out
    assert strict.json()["gate"]["reasons"] == [
        "4 case(s) changed behaviour (--fail-on-change); the first, "
        "customer_service/refund-eligible (golden/customer_service/cases/refunds.yaml:2): "
        "context_changed at step 2 (refunds), context session:refunds.issued (add)."
    ]

    # `run --fail-on-change` fails the gate, says why, and annotates the case on GitHub
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    gated = agentbench(
        checkout, "run", "golden/customer_service", "--baseline", baseline_id,
        "--fail-on-change", "--no-report",
    )  # fmt: skip
    assert gated.code == 1, gated.err + gated.out
    assert "gate: FAILED\n  - 4 case(s) changed behaviour (--fail-on-change)" in gated.out
    assert (
        "::warning file=golden/customer_service/cases/refunds.yaml,line=2,title=agentbench%3A "
        "customer_service/refund-eligible behaves differently (scores equal)::first divergence"
    ) in gated.out


def test_every_turn_is_aligned_and_a_turn_1_cause_is_named_at_turn_1(checkout: Path) -> None:
    apply(checkout, "customer_service", (RECORD_ORDER,))
    _, document = run_json(checkout, "golden/customer_service", "--baseline", "latest")
    case = cases_of(document["comparison"])[MULTI_TURN]
    assert case["kind"] == "behaviour_changed"
    outcome = next(r for r in document["results"] if r["case_id"] == MULTI_TURN)
    store = TraceStore(checkout / ".agentbench" / "traces.duckdb")
    turns = [len(stored_trajectory(store, run)) for run in outcome["turn_runs"]]
    assert len(turns) == 2 and all(turns)
    assert len(case["steps"]["current"]) == len(case["steps"]["baseline"]) == sum(turns)
    first = case["divergences"][0]
    assert first["position"] < turns[0]  # in the first turn's steps, not the last turn's
    assert first["class"] == "context_changed" and first["label"].endswith(", turn 1 of 2")


def test_an_unchanged_rerun_has_no_behaviour_change(checkout: Path) -> None:
    ran, document = run_json(checkout, "golden/", "--baseline", "latest", "--fail-on-change")
    assert ran.code == 0, ran.err + ran.out
    comparison = document["comparison"]
    assert kinds(comparison) == {}
    assert not any(c["divergences"] or c["steps"]["current"] for c in comparison["cases"])


def test_a_missing_warning_is_named_before_the_request_it_changed(checkout: Path) -> None:
    """The loop guard no longer warns on the second repeated search: the warning is missing
    and the next request drifts, both at one position. The cause comes first."""
    warn_later = edit("Limits(max_iterations=5, timeout_s=60)", "Limits(max_iterations=5, "
                      "timeout_s=60, repeat_warn_at=3)")  # fmt: skip
    apply(checkout, "brakes", (warn_later,))
    ran, document = run_json(checkout, "golden/brakes", "--baseline", "latest")
    assert ran.code == 1  # the drifted request fails the case
    case = cases_of(document["comparison"])["repeated-call-stopped"]
    assert case["kind"] == "newly_failing"
    first, second = case["divergences"][:2]
    assert first["position"] == second["position"]
    assert (first["class"], first["step"], first["label"]) == (
        "missing_step",
        2,
        "guard repeated_call (warn)",
    )
    assert (second["class"], second["step"]) == ("request_drift", 3)
    text = agentbench(
        checkout, "diff", document["comparison"]["baseline_eval"], document["eval_id"]
    )
    assert "first divergence — step 2 (brakes) missing_step: guard repeated_call (warn)" in text.out


def test_the_same_drift_in_both_evals_is_not_a_behaviour_change(checkout: Path) -> None:
    """A case that drifts from its cassette identically twice behaved the same both times."""
    warn_later = edit("Limits(max_iterations=5, timeout_s=60)", "Limits(max_iterations=5, "
                      "timeout_s=60, repeat_warn_at=3)")  # fmt: skip
    apply(checkout, "brakes", (warn_later,))
    first, _ = run_json(checkout, "golden/brakes")
    assert first.code == 1  # drifted from the cassette
    _, document = run_json(checkout, "golden/brakes", "--baseline", "latest",
                           "--fail-on-change")  # fmt: skip
    case = cases_of(document["comparison"])["repeated-call-stopped"]
    assert case["kind"] == "unchanged", case
    assert not case["divergences"]
    assert not any("changed behaviour" in r for r in document["comparison"]["gate"]["reasons"])


def test_at_one_position_the_request_comes_before_what_the_model_answered() -> None:
    found = [
        Divergence("stop_reason_changed", 4, "a", 3, "run end"),
        Divergence("response_changed", 4, "a", 3, "model call"),
        Divergence("request_drift", 4, "a", 3, "model call #3"),
        Divergence("extra_step", 4, "a", 2, "tool call x"),
        Divergence("missing_step", 4, "a", 2, "guard g (warn)"),
        Divergence("tool_result_changed", 2, "a", 1, "tool call y"),
    ]
    assert [d.cls for d in by_cause(found)] == [
        "tool_result_changed",
        "extra_step",  # the alignment's order among causes is kept
        "missing_step",
        "request_drift",
        "response_changed",
        "stop_reason_changed",
    ]


def test_a_slower_replay_is_not_a_latency_regression(checkout: Path) -> None:
    slow = edit('    status = CLUSTERS.get(cluster)\n', '    time.sleep(0.8)\n    status = '
                'CLUSTERS.get(cluster)\n')  # fmt: skip
    apply(checkout, "sre", (slow, edit("from agentbench import", "import time\n\nfrom agentbench "
                                       "import")))  # fmt: skip
    ran, document = run_json(checkout, "golden/sre", "--baseline", "latest")
    assert ran.code == 0, ran.err + ran.out
    case = cases_of(document["comparison"])["status-prod-eu"]
    assert case["kind"] == "unchanged" and case["reasons"] == []
    # still shown: the case took the extra 0.8 s
    assert case["current"]["duration_ms"] > case["baseline"]["duration_ms"] + 700
    assert "budget_regression" not in kinds(document["comparison"]).values()


def _live(store: TraceStore, eval_id: str, live: bool) -> None:
    with store.writing() as conn:
        conn.execute(
            "UPDATE evals SET config = ? WHERE eval_id = ?",
            [orjson.dumps({"live": live}).decode(), eval_id],
        )


def test_latency_is_judged_only_between_two_live_evals(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "made.duckdb")
    store_eval(store, "eval_base", [trial("slow", "passed", duration_ms=1000.0)])
    store_eval(store, "eval_cur", [trial("slow", "passed", duration_ms=3000.0)])
    for base_live, cur_live, kind in (
        (True, True, "budget_regression"),
        (True, False, "unchanged"),
        (False, True, "unchanged"),
    ):
        _live(store, "eval_base", base_live)
        _live(store, "eval_cur", cur_live)
        (case,) = compare_evals(store, "eval_base", "eval_cur").cases
        assert case.kind == kind, (base_live, cur_live)
        judged = base_live and cur_live
        assert case.reasons == (
            ["latency 1,000 ms → 3,000 ms (+200%, budget +20%)"] if judged else []
        )
