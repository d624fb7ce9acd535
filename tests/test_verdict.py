"""The one verdict: what decides it, in which order, and how each CI output renders it.

`decide` is checked path by path (passed, failed, an error of each kind, a partial eval of
shards, a shard judged alone, `--fail-under`, strict XPASS); the outputs — the terminal line,
JUnit's `gate` testcase, the Markdown heading, the report banner — are checked to say what the
verdict says. `test_verdict_journeys.py` runs the same paths through the CLI.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from agentbench.ci import github_annotations, junit_xml, markdown_summary
from agentbench.errors import UsageError
from agentbench.evals.comparing.gate import StrictXfail
from agentbench.evals.comparing.stats import TrialOutcome, summarize
from agentbench.evals.comparing.verdict import GateRules, Verdict, decide
from agentbench.evals.running.harness import EvalRun
from agentbench.evals.running.shards import Shard, ShardSet
from agentbench.report.verdict import verdict_view


def trial(case: str, status: str, suite: str = "sre", n: int = 1) -> TrialOutcome:
    passed = status in ("passed", "xpassed")
    scores = [{"name": "output_contains", "value": float(passed), "passed": passed,
               "reason": "ok" if passed else f"{case}: missing '21'"}]  # fmt: skip
    error = "no cassette at x.yaml" if status == "error" else None
    return TrialOutcome(suite, case, n, status, float(passed), scores, error=error,
                        source=f"golden/{suite}/cases.yaml:{len(case)}")  # fmt: skip


def verdict_of(outcomes: list[TrialOutcome], **given: object) -> Verdict:
    rules = given.pop("rules", GateRules())
    return decide(summarize(outcomes), outcomes, rules=rules, **given)  # type: ignore[arg-type]


PASSING = [trial("disk", "passed"), trial("gap", "xfailed")]


def test_every_counted_trial_passing_passes() -> None:
    verdict = verdict_of(PASSING)
    assert (verdict.status, verdict.exit_code, verdict.reasons) == ("passed", 0, [])
    assert verdict.line() == "gate: passed (no baseline compared: every counted trial must pass)"


def test_a_failing_case_fails_naming_it_with_file_and_line() -> None:
    verdict = verdict_of([*PASSING, trial("cpu", "failed"), trial("cpu", "failed", n=2)])
    assert (verdict.status, verdict.exit_code) == ("failed", 1)
    assert verdict.reasons == ["sre/cpu (golden/sre/cases.yaml:3) fails: output_contains: "
                               "cpu: missing '21'."]  # fmt: skip
    assert verdict.text().startswith("gate: FAILED\n  - sre/cpu (golden/sre/cases.yaml:3)")


def test_errors_come_first_and_decide_the_exit_code() -> None:
    failing = [trial("cpu", "failed"), trial("mem", "error")]
    crashed = verdict_of(failing)
    assert (crashed.status, crashed.exit_code) == ("error", 3)
    assert crashed.reasons[0] == (
        "sre/mem (golden/sre/cases.yaml:3) could not run (trial 1): no cassette at x.yaml"
    )
    assert crashed.reasons[1].startswith("sre/cpu ")  # the failure is still said
    assert crashed.line() == "gate: ERROR (exit 3)"
    unloaded = verdict_of(failing, suite_errors=["golden/sql: cannot import agent"])
    assert (unloaded.status, unloaded.exit_code) == ("error", 2)
    assert unloaded.reasons[0] == "suite error: golden/sql: cannot import agent"
    # a suite error with nothing else wrong is still an error: nothing of that suite ran
    assert verdict_of(PASSING, suite_errors=["golden/sql: boom"]).exit_code == 2
    usage = verdict_of(PASSING, failure=UsageError("no eval 'eval_x'"))
    assert (usage.status, usage.exit_code) == ("error", 2)
    assert usage.reasons == ["the comparison with the baseline could not be made: no eval 'eval_x'"]
    assert verdict_of(PASSING, failure=RuntimeError("boom")).exit_code == 3


def test_fail_under_counts_errors_as_failures_and_judges_the_rate() -> None:
    outcomes = [trial("a", "passed"), trial("b", "passed"), trial("c", "error")]
    passed = verdict_of(outcomes, rules=GateRules(fail_under=0.6))
    assert (passed.status, passed.exit_code) == ("passed", 0)
    assert passed.basis == "no baseline compared: the pass rate must reach 60%"
    failed = verdict_of(outcomes, rules=GateRules(fail_under=0.7))
    assert failed.reasons == ["The pass rate 66.7% is under the required 70.0%."]


def test_fail_under_says_the_trials_it_counts_and_never_absorbs_a_live_outage() -> None:
    outcomes = [trial("a", "passed"), trial("b", "passed"), trial("c", "error")]
    counted = verdict_of(outcomes, rules=GateRules(fail_under=0.6))
    assert counted.passed
    assert counted.notes == [
        "1 case(s) could not run, and --fail-under counts their trials as failures: sre/c "
        "(golden/sre/cases.yaml:1) could not run (trial 1): no cassette at x.yaml"
    ]
    assert "note: 1 case(s) could not run" in counted.text()
    outage = trial("d", "error")
    outage.error, outage.live_model_failed = "case 'd': the live model failed (refused)", True
    down = verdict_of([*outcomes, outage], rules=GateRules(fail_under=0.0))
    assert (down.status, down.exit_code) == ("error", 3)
    assert down.reasons == [
        "sre/d (golden/sre/cases.yaml:1) could not run (trial 1): case 'd': the live model "
        "failed (refused)"
    ]
    assert "sre/c" in down.notes[0] and "sre/d" not in down.notes[0]


def test_a_partial_eval_of_shards_fails_naming_the_missing_ones() -> None:
    verdict = verdict_of(PASSING, shards=ShardSet.of(["3/3", "1/3"]))
    assert (verdict.status, verdict.exit_code) == ("failed", 1)
    assert verdict.reasons == [
        "The eval is partial: it lacks shard(s) 2/3 (it holds 1/3, 3/3): merge every shard's "
        "store with `agentbench merge` before gating."
    ]
    assert verdict_of(PASSING, shards=ShardSet.of(["1/2", "2/2"])).passed
    assert verdict_of(PASSING, shards=ShardSet.of(None)).passed
    mixed = verdict_of(PASSING, shards=ShardSet.of(["1/2", "1/3"]))
    assert "shards of different splits (1/2, 1/3)" in mixed.reasons[0]


def test_a_shard_run_judges_its_own_trials_and_says_so() -> None:
    shard = Shard(1, 3)
    verdict = verdict_of(PASSING, shards=ShardSet.of(["1/3"]), part=shard)
    assert verdict.passed  # one shard of three is not a partial *eval* yet: it is the part
    assert verdict.basis.startswith("shard 1/3 alone, by the rule without a baseline")
    assert "`agentbench gate`" in verdict.basis
    assert not verdict_of([trial("cpu", "failed")], part=shard).passed


def test_strict_xpass_fails_only_where_strict() -> None:
    outcomes = [trial("disk", "passed"), trial("gap", "xpassed", suite="sql")]
    assert verdict_of(outcomes).passed  # reported, not gating
    strict = GateRules(strict_xfail=StrictXfail.of(False, {"strict_xfail": ["sql"]}))
    verdict = verdict_of(outcomes, rules=strict)
    assert verdict.reasons == [
        "sql/gap (golden/sql/cases.yaml:3) is marked xfail and passed (XPASS, strict): remove "
        "its xfail if it is fixed, or find out why its scorers let it pass."
    ]
    assert verdict_of(outcomes, rules=GateRules(strict_xfail=StrictXfail(True))).exit_code == 1
    other = GateRules(strict_xfail=StrictXfail.of(False, {"strict_xfail": ["sre"]}))
    assert verdict_of(outcomes, rules=other).passed


def test_reasons_are_capped_and_counted() -> None:
    verdict = verdict_of([trial(f"case-{i:03d}", "failed") for i in range(70)])
    assert len(verdict.reasons) == 51
    assert verdict.reasons[-1] == "… and 20 more such case(s)."
    assert verdict.text().count("\n  - ") == 20 and "  … and 31 more" in verdict.text()


# -- every output says the verdict ----------------------------------------------------------


def run_of(outcomes: list[TrialOutcome]) -> EvalRun:
    return EvalRun("eval_x", outcomes=outcomes)


VERDICTS = {
    "passed": verdict_of(PASSING),
    "failed": verdict_of(PASSING, shards=ShardSet.of(["1/2"])),
    "error": verdict_of(PASSING, suite_errors=["golden/sql: boom"]),
}


@pytest.mark.parametrize("status", list(VERDICTS))
def test_junit_carries_the_verdict_as_a_gate_testcase(status: str) -> None:
    verdict = VERDICTS[status]
    top = ET.fromstring(junit_xml(PASSING, verdict=verdict))
    gate_suite = top[-1]
    assert gate_suite.get("name") == "agentbench.gate"
    (case,) = list(gate_suite)
    assert (case.get("classname"), case.get("name")) == ("agentbench", "gate")
    children = {child.tag: child for child in case}
    assert children["system-out"].text.startswith(verdict.line())
    wanted = {"passed": None, "failed": "failure", "error": "error"}[status]
    if wanted is None:
        assert set(children) == {"system-out"}
        assert (top.get("failures"), top.get("errors")) == ("0", "0")
    else:
        assert children[wanted].get("type") == "agentbench.gate"
        message = f"gate {'failed' if status == 'failed' else 'error'} (exit {verdict.exit_code})"
        assert children[wanted].get("message").startswith(message)
        assert children[wanted].text == "\n".join(verdict.reasons)
        assert top.get(f"{wanted}s") == "1"
    assert top.get("tests") == str(len(PASSING) + 1)


@pytest.mark.parametrize(
    ("status", "heading"),
    [("passed", "✅ passed"), ("failed", "❌ gate failed"), ("error", "⛔ error")],
)
def test_the_markdown_heading_and_banner_are_the_verdict(status: str, heading: str) -> None:
    verdict = VERDICTS[status]
    text = markdown_summary(run_of(PASSING), verdict=verdict)
    assert text.startswith(f"## agentbench: {heading}\n")
    for reason in verdict.reasons:
        assert f"- {reason}" in text
    view = verdict_view(PASSING, summarize(PASSING), None, gate=verdict.as_dict())
    assert view.words == f"Gate {verdict.words}" and view.reasons == verdict.reasons
    assert view.exit_code == verdict.exit_code


def test_a_strict_xpass_fails_in_junit_and_annotates_as_an_error() -> None:
    outcomes = [trial("gap", "xpassed")]
    strict = verdict_of(outcomes, rules=GateRules(strict_xfail=StrictXfail(True)))
    top = ET.fromstring(junit_xml(outcomes, verdict=strict))
    failure = top.find("testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "agentbench.xpass_strict"
    assert top.get("failures") == "2"  # the XPASS and the gate
    lax = ET.fromstring(junit_xml(outcomes, verdict=verdict_of(outcomes)))
    assert lax.find("testsuite/testcase/failure") is None
    assert "XPASS" in lax.find("testsuite/testcase/system-out").text
    lines = github_annotations(outcomes, verdict=strict)
    assert lines[0].startswith("::error title=agentbench%3A gate FAILED (exit 1)::")
    assert lines[1].startswith("::error file=golden/sre/cases.yaml,line=3,title=agentbench%3A "
                               "sre/gap passed unexpectedly (XPASS)::")  # fmt: skip
    # the annotation says what made it strict: the option, or the suite's own key
    assert lines[1].endswith("::marked xfail, and passed: --strict-xfail, so the gate fails")
    by_suite = GateRules(strict_xfail=StrictXfail.of(False, {"strict_xfail": ["sre"]}))
    suite_strict = github_annotations(outcomes, verdict=verdict_of(outcomes, rules=by_suite))
    assert suite_strict[1].endswith("its suite says strict_xfail: true, so the gate fails")
    assert github_annotations(outcomes, verdict=verdict_of(outcomes))[0].startswith("::warning")
    text = markdown_summary(run_of(outcomes), verdict=strict)
    assert "### XPASS: marked xfail, and passed (1)" in text
    assert "| fails the gate (strict) |" in text
