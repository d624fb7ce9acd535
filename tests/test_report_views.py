"""What a report shows, before any HTML: the verdict banner, tool schemas, field diffs, charts.

These are the pieces `report.html.j2` lays out; the rendered pages are checked in
`test_report_html.py` and opened in Chromium in `test_report_pages.py`.
"""

from __future__ import annotations

from typing import Any

from agentbench.evals.comparing.stats import TrialOutcome, summarize
from agentbench.report.charts import histogram, rate_bars, series
from agentbench.report.comparison import comparison_view, divergence_fields, field_changes
from agentbench.report.timeline import request_changes, schema_type, tool_table
from agentbench.report.verdict import verdict_view


def trial(case_id: str, status: str, trial_no: int = 1, reason: str = "missing X") -> TrialOutcome:
    passed = status == "passed"
    return TrialOutcome(
        suite="sre",
        case_id=case_id,
        trial=trial_no,
        status=status,
        score=float(passed),
        scores=[
            {"name": "output_contains", "value": float(passed), "passed": passed, "reason": reason}
        ],
        source=f"golden/sre/cases.yaml:{len(case_id)}",
        error="boom" if status == "error" else None,
    )


def test_without_a_baseline_any_failing_trial_fails_the_verdict() -> None:
    outcomes = [
        trial("disk", "passed"),
        trial("cpu", "failed"),
        trial("mem", "error"),
        trial("swap", "passed"),
        trial("swap", "failed", 2),
        trial("gap", "xfailed"),
    ]
    view = verdict_view(outcomes, summarize(outcomes), None)
    # as `run` without a baseline: a trial that could not run makes it an error (exit 3)
    assert view.failed and view.words == "Gate ERROR" and view.exit_code == 3
    assert view.basis == "no baseline compared: every counted trial must pass"
    # failing cases named with file:line, errors first
    assert view.reasons[0] == "sre/mem (golden/sre/cases.yaml:3) could not run (trial 1): boom"
    assert "sre/cpu (golden/sre/cases.yaml:3) fails: output_contains: missing X." in view.reasons
    kinds = [(a.kind, a.case_id, a.row) for a in view.attention]
    assert kinds == [
        ("error", "mem", "sre/mem/1"),
        ("failed", "cpu", "sre/cpu/1"),
        ("flaky", "swap", "sre/swap/2"),
    ]
    assert "1 of 2 trials passed" in view.attention[2].reason


def test_a_passing_eval_passes_and_lists_nothing() -> None:
    outcomes = [trial("disk", "passed"), trial("gap", "xfailed")]
    view = verdict_view(outcomes, summarize(outcomes), None)
    assert not view.failed and view.words == "Gate passed"
    assert view.reasons == [] and view.attention == []


def test_with_a_comparison_the_gate_decides_and_regressions_come_first() -> None:
    outcomes = [trial("disk", "failed"), trial("cpu", "failed"), trial("mem", "passed")]
    comparison: dict[str, Any] = {
        "baseline_eval": "eval_base",
        "current_eval": "eval_cur",
        "gate": {"failed": True, "reasons": ["sre/disk (golden/sre/cases.yaml:4) passed ..."]},
        "cases": [
            {"suite": "sre", "case_id": "cpu", "kind": "unchanged"},
            {
                "suite": "sre",
                "case_id": "disk",
                "kind": "newly_failing",
                "source": "golden/sre/cases.yaml:4",
                "reasons": ["output_contains: missing X"],
                "divergences": [
                    {
                        "class": "tool_result_changed",
                        "step": 2,
                        "agent": "sre",
                        "label": "tool call df",
                    }
                ],
            },
            {"suite": "sre", "case_id": "mem", "kind": "score_changed", "score_delta": 0.5},
        ],
    }
    view = verdict_view(outcomes, summarize(outcomes), comparison)
    assert view.failed and view.basis == "compared with baseline eval_base"
    assert view.reasons == ["sre/disk (golden/sre/cases.yaml:4) passed ..."]
    first = view.attention[0]
    assert (first.kind, first.case_id, first.change) == ("newly_failing", "disk", "change-1")
    assert "first divergence: tool_result_changed at step 2 (sre), tool call df" in first.reason
    # cpu was failing already (a known failure), and mem's score rose: no "score dropped"
    assert [(a.kind, a.case_id) for a in view.attention] == [
        ("newly_failing", "disk"),
        ("failed", "cpu"),
    ]


def test_tool_schemas_become_a_table_of_parameters() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the docs.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Words."},
                        "limit": {"type": "integer", "default": 5},
                        "kinds": {"type": "array", "items": {"enum": ["doc", "faq"]}},
                        "since": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                        "order": {"$ref": "#/$defs/Order"},
                    },
                    "required": ["query"],
                    "$defs": {"Order": {"enum": ["new", "old"]}},
                },
            },
        }
    ]
    [table] = tool_table(tools) or []
    assert table["name"] == "search" and table["description"] == "Search the docs."
    rows = {p["name"]: (p["type"], p["required"], p["default"]) for p in table["params"]}
    assert rows == {
        "query": ("string", True, None),
        "limit": ("integer", False, "5"),
        "kinds": ('list["doc" | "faq"]', False, None),
        "since": ("string | null", False, None),
        "order": ('"new" | "old"', False, None),
    }
    changes = request_changes({"set": {"model": "m", "tools": tools}})
    assert changes["tools"] == [table] and changes["set"] == {"model": "m"}
    # not a list of tools: shown as it is
    assert request_changes({"set": {"tools": "weird"}})["set"] == {"tools": "weird"}
    assert schema_type({"$ref": "#/$defs/Address"}, {}) == "Address"


def test_diffs_name_the_changed_fields_as_the_terminal_does() -> None:
    old = {"result_kind": "ok", "result": {"total": 42.5, "items": [1, 2]}}
    new = {"result_kind": "ok", "result": {"total": 40.5, "items": [1, 2], "note": "x"}}
    fields = [(f.path, f.text) for f in field_changes(old, new)]
    assert fields == [("result.total", "42.5 → 40.5"), ("result.note", "added 'x'")]
    [text] = field_changes("the total is 42.5 EUR", "the total is 40.5 EUR")
    assert text.path == "(text)" and "42.5" in text.text and "40.5" in text.text
    drift = {
        "class": "request_drift",
        "changes": [
            {
                "path": "messages[0].content",
                "kind": "changed",
                "old": "Be brief.",
                "new": "Be short.",
            }
        ],
    }
    [change] = divergence_fields(drift)
    assert change.path == "messages[0].content" and "Be brief." in change.text
    # a secret under a secret-looking key is never shown
    secret = divergence_fields(
        {"class": "tool_args_changed", "old": {"api_key": "sk-1"}, "new": {"api_key": "sk-2"}}
    )
    assert "sk-1" not in secret[0].text and "sk-2" not in secret[0].text


def test_comparison_rows_carry_their_field_changes() -> None:
    def step(total: float) -> dict[str, Any]:
        return {
            "kind": "tool_call",
            "agent": "a",
            "step": 1,
            "signature": ["tool_call", "df"],
            "detail": {"tool": "df", "arguments": {}, "result": {"total": total}},
        }

    view = comparison_view(
        {
            "baseline_eval": "b",
            "current_eval": "c",
            "cases": [
                {
                    "suite": "s",
                    "case_id": "x",
                    "kind": "newly_failing",
                    "steps": {"baseline": [step(42.5)], "current": [step(40.5)]},
                }
            ],
        }
    )
    [row] = view.groups[0].cases[0].rows
    assert row.first and [(f.path, f.text) for f in row.fields] == [("result.total", "42.5 → 40.5")]


def test_charts_have_axes_and_counts() -> None:
    chart = histogram("t", "Tokens", [10.0, 20.0, 20.0, 90.0], x_title="tokens", low=0.0)
    assert chart.y_top == "2" and chart.x_title == "tokens" and chart.y_title == "trials"
    assert [b.value for b in chart.bars if b.value] == ["1", "2", "1"]
    rates = rate_bars("r", "Pass rate", {"a": 0.5, "b": None})
    assert [b.value for b in rates.bars] == ["50%", "—"] and rates.y_top == "100%"
    line = series(
        "h",
        "Cost",
        [("abc1234", "eval_1", 0.002), ("def5678", "eval_2", None)],
        value_text="${:,.4f}",
    )
    assert [b.value for b in line.bars] == ["$0.0020", "—"] and line.bars[0].tick == "abc1234"


def test_a_threshold_verdict_reached_without_a_baseline_is_shown_as_given() -> None:
    outcomes = [trial("disk", "passed"), trial("cpu", "failed"), trial("mem", "passed")]
    gate = {"failed": False, "reasons": [], "basis": "no baseline; pass rate 66.7% ≥ 60%"}
    view = verdict_view(outcomes, summarize(outcomes), None, gate)
    assert not view.failed and view.basis == "no baseline; pass rate 66.7% ≥ 60%"
    assert [a.case_id for a in view.attention] == ["cpu"]  # still worth a look


def test_a_long_list_of_failures_is_cut_and_counted() -> None:
    outcomes = [trial(f"case-{i:03d}", "failed") for i in range(70)]
    view = verdict_view(outcomes, summarize(outcomes), None)
    assert len(view.attention) == 50 and view.more_attention == 20
    # the verdict names 50 cases and counts the other 20 in one more reason
    assert len(view.reasons) == 12 and view.more_reasons == 39


def test_a_run_gated_by_its_threshold_gets_the_same_banner_as_its_exit_code() -> None:
    from agentbench.evals.comparing.verdict import GateRules, decide
    from agentbench.evals.running.harness import EvalRun

    run = EvalRun("eval_x", outcomes=[trial("disk", "passed"), trial("cpu", "failed")])
    # --fail-under 0.5: one of two passed, the gate passed, the exit code is 0 ...
    verdict = decide(run.summary, run.outcomes, rules=GateRules(fail_under=0.5))
    assert verdict.exit_code == 0
    view = verdict_view(run.outcomes, run.summary, None, gate=verdict.as_dict())
    assert not view.failed and view.words == "Gate passed"  # ... though a case failed
    assert view.basis == "no baseline compared: the pass rate must reach 50%"
    # --fail-under 0.6: the gate fails, exit 1, and the banner says so with the reason.
    verdict = decide(run.summary, run.outcomes, rules=GateRules(fail_under=0.6))
    view = verdict_view(run.outcomes, run.summary, None, gate=verdict.as_dict())
    assert verdict.exit_code == 1 and view.failed and view.exit_code == 1
    assert view.reasons == ["The pass rate 50.0% is under the required 60.0%."]


def test_the_verdict_wins_over_the_comparisons_own_gate() -> None:
    outcomes = [trial("disk", "passed")]
    comparison = {"baseline_eval": "eval_a", "gate": {"failed": False, "reasons": []}}
    error = {
        "status": "error",
        "exit_code": 2,
        "reasons": ["suite error: golden/sre: cannot import"],
        "basis": "compared with baseline eval_a",
        "notes": ["baseline eval_a (latest)"],
    }
    view = verdict_view(outcomes, summarize(outcomes), comparison, gate=error)
    assert view.failed and view.words == "Gate ERROR" and view.exit_code == 2
    assert view.reasons == ["suite error: golden/sre: cannot import"]
    assert view.notes == ["baseline eval_a (latest)"]
