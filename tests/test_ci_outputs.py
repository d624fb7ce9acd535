"""CI outputs: JUnit XML, GitHub annotations, the markdown summary and its size cap."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentbench.ci import (
    append_github_step_summary,
    escape_data,
    escape_property,
    github_annotations,
    markdown_summary,
    write_junit,
    write_summary_md,
)
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.running.harness import EvalRun


def score(name: str, passed: bool, reason: str) -> dict[str, object]:
    return {"name": name, "value": 1.0 if passed else 0.0, "passed": passed, "reason": reason}


def outcomes(root: Path) -> list[TrialOutcome]:
    cases = root / "golden" / "sre" / "cases" / "sre.yaml"
    return [
        TrialOutcome(
            "sre",
            "ok",
            1,
            "passed",
            1.0,
            [score("stop_reason", True, "completed")],
            duration_ms=1500.0,
            source=f"{cases}:2",
        ),
        TrialOutcome(
            "sre",
            "broken",
            1,
            "failed",
            0.0,
            [
                score("output_contains", False, "missing '21'\x1b[0m"),
                score("tool_called", False, "get_weather was not called"),
            ],
            duration_ms=250.0,
            source=f"{cases}:9",
        ),
        TrialOutcome("sre", "broken", 2, "passed", 1.0, [], duration_ms=250.0, source=f"{cases}:9"),
        TrialOutcome(
            "sql",
            "crash",
            1,
            "error",
            0.0,
            error="no cassette at x.yaml\nre-record",
            source="golden/sql/cases/sql.yaml:4",
        ),
        TrialOutcome("sql", "later", 1, "skipped", 0.0, error="not ready"),
        TrialOutcome(
            "sql",
            "snow",
            1,
            "xfailed",
            0.0,
            [score("output_contains", False, "missing 'snow'")],
            error="no forecast",
        ),
        TrialOutcome("sql", "lucky", 1, "xpassed", 1.0, []),
    ]


# -- JUnit --------------------------------------------------------------------------------------


def test_junit_has_the_usual_shape_and_counts(tmp_path: Path) -> None:
    path = write_junit(tmp_path / "out" / "junit.xml", outcomes(tmp_path), root=tmp_path)
    top = ET.parse(path).getroot()
    assert top.tag == "testsuites"
    assert {k: top.get(k) for k in ("name", "tests", "failures", "errors", "skipped")} == {
        "name": "agentbench",
        "tests": "7",
        "failures": "1",
        "errors": "1",
        "skipped": "2",
    }
    assert top.get("time") == "2.000"
    suites = {s.get("name"): s for s in top}
    assert list(suites) == ["sql", "sre"]
    assert all(s.tag == "testsuite" for s in top)
    assert {k: suites["sre"].get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "3",
        "failures": "1",
        "errors": "0",
        "skipped": "0",
    }
    sre = {c.get("name"): c for c in suites["sre"]}
    assert list(sre) == ["broken[trial 1]", "broken[trial 2]", "ok[trial 1]"]
    broken = sre["broken[trial 1]"]
    assert broken.attrib == {
        "classname": "sre",
        "name": "broken[trial 1]",
        "time": "0.250",
        "file": "golden/sre/cases/sre.yaml",
        "line": "9",
    }
    (failure,) = list(broken)
    assert failure.tag == "failure"
    assert failure.get("message") == "output_contains: missing '21'[0m"  # ESC dropped
    assert failure.text == (
        "output_contains: missing '21'[0m\ntool_called: get_weather was not called"
    )
    assert list(sre["broken[trial 2]"]) == []
    sql = {c.get("name"): c for c in suites["sql"]}
    error = sql["crash[trial 1]"].find("error")
    assert error is not None and error.get("message") == "no cassette at x.yaml"
    assert error.text == "no cassette at x.yaml\nre-record"
    assert sql["crash[trial 1]"].get("file") == "golden/sql/cases/sql.yaml"
    assert sql["later[trial 1]"].find("skipped").get("message") == "not ready"
    assert "file" not in sql["later[trial 1]"].attrib
    assert sql["snow[trial 1]"].find("skipped").get("message") == "expected failure: no forecast"
    assert sql["lucky[trial 1]"].find("system-out").text.startswith("passed unexpectedly")


def test_junit_only_uses_elements_and_attributes_of_the_junit_schema(tmp_path: Path) -> None:
    top = ET.parse(write_junit(tmp_path / "j.xml", outcomes(tmp_path))).getroot()
    allowed = {
        "testsuites": {"name", "tests", "failures", "errors", "skipped", "time"},
        "testsuite": {"name", "tests", "failures", "errors", "skipped", "time"},
        "testcase": {"classname", "name", "time", "file", "line"},
        "failure": {"message", "type"},
        "error": {"message", "type"},
        "skipped": {"message"},
        "system-out": set(),
    }
    for element in top.iter():
        assert element.tag in allowed and set(element.attrib) <= allowed[element.tag]
        if element.tag == "testcase":
            assert {"classname", "name", "time"} <= set(element.attrib)
            assert len([c for c in element if c.tag != "system-out"]) <= 1


# -- annotations -----------------------------------------------------------------------------


def test_escaping_follows_the_workflow_command_rules() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a: b, c%\n") == "a%3A b%2C c%25%0A"


def comparison(**changes: object) -> dict[str, object]:
    def case(case_id: str, kind: str, reasons: list[str]) -> dict[str, object]:
        side = {
            "status": "passed",
            "score": 1.0,
            "passed_trials": 1,
            "trials": 2,
            "tokens": 10.0,
            "cost_usd": None,
            "duration_ms": 5.0,
            "run_id": None,
        }
        return {
            "suite": "sre",
            "case_id": case_id,
            "kind": kind,
            "baseline": side,
            "current": side,
            "score_delta": 0.0,
            "reasons": reasons,
            "divergences": [],
            "steps": {"baseline": [], "current": []},
        }

    data: dict[str, object] = {
        "baseline_eval": "eval_a",
        "current_eval": "eval_b",
        "pass_rate": {"baseline": 1.0, "current": 0.5, "delta": -0.5, "ci95": [-0.8, -0.2]},
        "p_value": 0.01,
        "significant_drop": True,
        "gate": {"failed": True, "reasons": ["sre/broken passed in the baseline and fails now."]},
        "cases": [
            case("broken", "newly_failing", ["output_contains: missing '21'"]),
            case("ok", "budget_regression", ["tokens 10 → 20 (+100%, budget +20%)"]),
            case("wobbly", "flaky", []),
        ],
    }
    data.update(changes)
    return data


def test_annotations_point_at_the_case_in_its_file(tmp_path: Path) -> None:
    lines = github_annotations(outcomes(tmp_path), comparison(), root=tmp_path)
    assert lines[0] == (
        "::error title=agentbench%3A pass rate dropped::100.0%25 → 50.0%25 (−50.0 points, "
        "sign test p = 0.01)"
    )
    assert lines[1] == (
        "::error file=golden/sre/cases/sre.yaml,line=9,"
        "title=agentbench%3A sre/broken regressed (passed in the baseline)::"
        "output_contains: missing '21'\x1b[0m%0Atool_called: get_weather was not called"
    )
    assert lines[2] == (
        "::error file=golden/sql/cases/sql.yaml,line=4,title=agentbench%3A sql/crash could not "
        "run::"
        "no cassette at x.yaml%0Are-record"
    )
    assert lines[3] == (
        "::warning title=agentbench%3A sql/lucky passed unexpectedly (XPASS)::"
        "marked xfail, and passed"
    )
    assert lines[4] == (
        "::warning file=golden/sre/cases/sre.yaml,line=2,"
        "title=agentbench%3A sre/ok is over budget::tokens 10 → 20 (+100%25, budget +20%25)"
    )
    assert lines[5] == (
        "::warning title=agentbench%3A sre/wobbly is flaky::"
        "baseline: 1/2 trials passed; current: 1/2 trials passed"
    )
    assert len(lines) == 6  # one per case, not per trial; an XFAIL never annotates


def test_annotations_without_a_comparison_and_with_a_limit(tmp_path: Path) -> None:
    lines = github_annotations(outcomes(tmp_path), None, root=tmp_path)
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::error", "::warning"]
    assert "title=agentbench%3A sre/broken failed::" in lines[0]
    many = [
        TrialOutcome("s", f"c{i}", 1, "failed", 0.0, [score("x", False, "no")]) for i in range(60)
    ]
    capped = github_annotations(many, None, limit=10)
    assert len(capped) == 10 and capped[-1] == "::notice::51 more agentbench annotations not shown"


# -- markdown summary ------------------------------------------------------------------------


def run_of(items: list[TrialOutcome]) -> EvalRun:
    return EvalRun("eval_b", outcomes=items, code_version="abc123+dirty")


def test_markdown_summary_with_a_comparison(tmp_path: Path) -> None:
    text = markdown_summary(run_of(outcomes(tmp_path)), comparison())
    assert text.startswith("## agentbench: ❌ gate failed\n")
    assert "Eval `eval_b` · 6 cases · 7 trials · code `abc123+dirty`" in text
    # a trial that could not run has a column of its own: it did not fail
    assert "| suite | cases | passed | failed | errors | xfail | skipped | pass rate |" in text
    assert "| sql | 4 | 0 | 0 | 1 | 2 | 1 | 0.0% |" in text
    assert "| sre | 2 | 2 | 1 | 0 | 0 | 0 | 66.7% |" in text
    assert "### Compared with `eval_a`" in text
    assert (
        "pass rate 100.0% → 50.0% (−50.0 points; 95% CI [−80.0, −20.0]; sign test p = 0.01" in text
    )
    assert (
        "**Gate failed** (exit 1) — judged by: compared with baseline eval_a\n\n"
        "- sre/broken passed in the baseline and fails now." in text
    )
    assert "#### Newly failing (1)" in text and "#### Flaky (reported, not gating) (1)" in text
    assert "| `sre/broken` | passed 1/2 → 1/2 trials, score 1.00 → 1.00 |" in text
    assert "### Failing (1)" in text and "### Could not run (1)" in text
    assert "`sql/crash` | 1 | golden/sql/cases/sql.yaml:4 | no cassette at x.yaml re-record |" in (
        text  # one line inside a table cell
    )


def test_markdown_summary_without_a_baseline_escapes_cells(tmp_path: Path) -> None:
    items = [TrialOutcome("s", "pipe", 1, "failed", 0.0, [score("x", False, "a | b <br>")])]
    text = markdown_summary(run_of(items))
    assert text.startswith("## agentbench: ❌ gate failed")
    assert "Compared with" not in text
    assert "x: a \\| b &lt;br>" in text
    assert markdown_summary(run_of(items), gate_failed=False).startswith("## agentbench: ✅ passed")


def test_markdown_summary_stays_under_the_size_cap(tmp_path: Path) -> None:
    long_reason = "r" * 280
    items = [
        TrialOutcome("s", f"case-{i:05d}", 1, "failed", 0.0, [score("x", False, long_reason)])
        for i in range(6000)
    ]
    text = markdown_summary(run_of(items))
    assert len(text.encode()) <= 1_000_000
    assert "### Failing (6000)" in text
    assert "more failing trials (truncated to keep this summary under 1 MiB)" in text
    tiny = markdown_summary(run_of(items), max_bytes=300)  # too small even without the lists
    assert len(tiny.encode()) <= 300 and tiny.endswith("size limit_\n")


def test_summary_files_and_the_github_step_summary(tmp_path: Path, monkeypatch) -> None:
    run = run_of(outcomes(tmp_path))
    written = write_summary_md(tmp_path / "ci" / "summary.md", run, comparison())
    assert written.read_text().startswith("## agentbench")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert append_github_step_summary("# hi") is None
    target = tmp_path / "step.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    assert append_github_step_summary("# one") == target
    append_github_step_summary("# two\n")
    assert target.read_text() == "earlier step\n# one\n# two\n"


@pytest.mark.parametrize("status", ["passed", "xfailed", "skipped"])
def test_nothing_to_annotate(status: str) -> None:
    assert github_annotations([TrialOutcome("s", "c", 1, status, 1.0)], None) == []
