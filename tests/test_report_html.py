"""HTML reports rendered from a real trace store: content, escaping, CSP, comparison, CLI.

The evals here are real: a tiny agent runs through `Runner` against a scripted model with a
`TraceStore`, and the scored trials are written with `results_store`, as the harness does.
One case's model output and tool result carry XSS payloads; `test_report_browser.py` opens
the same reports in Chromium.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from markupsafe import escape

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.cli import main
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.running.harness import EvalRun, HarnessOptions
from agentbench.evals.storage import results_store
from agentbench.replay.convert import stored_trajectory
from agentbench.replay.diff import align
from agentbench.report import render_report, write_diff_report, write_report
from agentbench.report.embed import csp_source, script_json
from agentbench.report.packing import report_details
from agentbench.trace.store import TraceStore

PAYLOADS = (
    "<img src=x onerror=window.__pwned=1>",
    "</script><script>window.__pwned=2</script>",
    '"><svg onload=window.__pwned=3>',
)
XSS_TEXT = " | ".join(PAYLOADS)


def _lookup_result(query: str, evil: bool) -> dict[str, Any]:
    return {"query": query, "note": XSS_TEXT if evil else "nothing odd"}


def make_agents(evil_tool: bool) -> tuple[Agent, Agent]:
    @tool(effect="read_only")
    def lookup(query: str) -> dict[str, Any]:
        """Look something up.

        Args:
            query: What to look up.
        """
        return _lookup_result(query, evil_tool)

    helper = Agent(name="helper", instructions="Finish the job.")
    desk = Agent(name="desk", instructions="Answer.", tools=[lookup], handoffs=[helper])
    return desk, helper


def _run(
    store: TraceStore, eval_id: str, case_id: str, trial: int, agent: Agent, script: list
) -> Any:
    labelled = store.with_labels(eval_id=eval_id, case_id=case_id, trial=trial)
    return Runner.run_sync(
        agent, f"question for {case_id}", model=ScriptedModel(script), store=labelled
    )


def record_eval(store: TraceStore, eval_id: str, *, evil_tool: bool = True) -> EvalRun:
    """Six trials over two suites: passed, failed (the XSS case), xfailed, error, skipped."""
    desk, _ = make_agents(evil_tool)
    run = EvalRun(eval_id, code_version="abc123")
    suites = [SimpleNamespace(name=n, path=Path(n), model=None) for n in ("alpha", "beta")]
    results_store.start_eval(store, run, suites, HarnessOptions())

    def outcome(
        suite: str, case_id: str, trial: int, status: str, result: Any, **extra: Any
    ) -> None:
        passed = status in ("passed", "xpassed")
        scores = extra.pop(
            "scores",
            [{"name": "output_contains", "value": float(passed), "passed": passed, "reason": "ok"}],
        )
        made = TrialOutcome(
            suite=suite,
            case_id=case_id,
            trial=trial,
            status=status,
            score=float(passed),
            scores=scores,
            run_id=result.runs[0].run_id if result is not None else None,
            duration_ms=extra.pop("duration_ms", 120.0 * trial),
            tokens=extra.pop("tokens", 300),
            source=f"golden/{suite}/cases.yaml:{trial * 3}",
            **extra,
        )
        run.outcomes.append(made)

    evil = _run(
        store,
        eval_id,
        "xss-case",
        1,
        desk,
        [ToolCall("lookup", {"query": PAYLOADS[0]}), f"Final: {XSS_TEXT}"],
    )
    outcome(
        "alpha",
        "xss-case",
        1,
        "failed",
        evil,
        tags=["security"],
        scores=[
            {"name": "output_not_contains", "value": 0.0, "passed": False, "reason": XSS_TEXT},
        ],
    )
    for trial in (1, 2):
        ok = _run(store, eval_id, "ok-case", trial, desk, ["all fine"])
        outcome("alpha", "ok-case", trial, "passed", ok, tags=["smoke"])
    handed = _run(
        store,
        eval_id,
        "handoff-case",
        1,
        desk,
        [
            ToolCall("transfer_to_helper", {"reason": "needs help", "summary": "s"}),
            "helper finished",
        ],
    )
    outcome("beta", "handoff-case", 1, "passed", handed, tags=["smoke", "handoff"])
    known = _run(store, eval_id, "known-gap", 1, desk, ["no idea"])
    outcome("beta", "known-gap", 1, "xfailed", known, error="not built yet")
    outcome("beta", "broken", 1, "error", None, error="no cassette at beta/broken.yaml")
    outcome("beta", "later", 1, "skipped", None, error="skipped: later")
    results_store.store_outcomes(store, eval_id, run.outcomes)
    store.flush()
    results_store.finish_eval(store, run)
    return run


def make_comparison(store: TraceStore, baseline: str, current: str) -> dict[str, Any]:
    """A comparison of the XSS case between two evals, built the way the gate builds one."""

    def run_id(eval_id: str) -> str:
        found = store.sql(
            f"SELECT run_id FROM results WHERE case_id = 'xss-case' AND eval_id = '{eval_id}'"
        ).rows
        return str(found[0][0])

    old, new = stored_trajectory(store, run_id(baseline)), stored_trajectory(store, run_id(current))
    return {
        "baseline_eval": baseline,
        "current_eval": current,
        "pass_rate": {"baseline": 0.75, "current": 0.5, "delta": -0.25, "ci95": [-0.6, 0.1]},
        "p_value": 0.04,
        "significant_drop": True,
        "gate": {"failed": True, "reasons": [f"alpha/xss-case newly failing: {PAYLOADS[2]}"]},
        "cases": [
            {
                "suite": "alpha",
                "case_id": "xss-case",
                "kind": "newly_failing",
                "baseline": {"status": "passed", "score": 1.0, "passed_trials": 1, "trials": 1},
                "current": {"status": "failed", "score": 0.0, "passed_trials": 0, "trials": 1},
                "score_delta": -1.0,
                "reasons": [PAYLOADS[1]],
                "divergences": [d.as_dict() for d in align(old, new)],
                "steps": {
                    "baseline": [s.as_dict() for s in old],
                    "current": [s.as_dict() for s in new],
                },
            },
            {"suite": "alpha", "case_id": "ok-case", "kind": "unchanged", "divergences": []},
        ],
    }


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A store with a baseline eval (harmless tool) and a current one (XSS in tool results)."""
    folder = tmp_path_factory.mktemp("report")
    store = TraceStore(folder / "traces.duckdb")
    record_eval(store, "eval_base", evil_tool=False)
    record_eval(store, "eval_cur", evil_tool=True)
    comparison = make_comparison(store, "eval_base", "eval_cur")
    out = folder / "reports"
    page = write_report(store, "eval_cur", out, comparison=comparison)
    diff = write_diff_report(store, comparison, out)
    yield SimpleNamespace(store=store, comparison=comparison, out=out, page=page, diff=diff)
    store.close()


def _embedded(source: str, name: str) -> Any:
    if name == "case-data":  # the details travel deflated (report.packing)
        assert source.count('id="case-data"') == 1
        return orjson.loads(report_details(source) or "null")
    found = re.findall(rf'<script type="application/json" id="{name}">(.*?)</script>', source, re.S)
    assert len(found) == 1
    return orjson.loads(found[0])


def test_writes_one_file_per_eval_and_per_diff(reports: SimpleNamespace) -> None:
    assert reports.page == reports.out / "eval_cur" / "index.html"
    assert reports.diff == reports.out / "diff-eval_base-eval_cur" / "index.html"
    assert [p.name for p in reports.page.parent.iterdir()] == ["index.html"]


def test_summary_rows_and_charts(reports: SimpleNamespace) -> None:
    page = reports.page.read_text()
    assert "abc123" in page and "pass@2" in page  # ok-case ran twice
    # one row per case × trial, in suite / case / trial order
    rows = _embedded(page, "case-rows")
    assert [(r["suite"], r["case_id"], r["trial"], r["status"]) for r in rows] == [
        ("alpha", "ok-case", 1, "passed"),
        ("alpha", "ok-case", 2, "passed"),
        ("alpha", "xss-case", 1, "failed"),
        ("beta", "broken", 1, "error"),
        ("beta", "handoff-case", 1, "passed"),
        ("beta", "known-gap", 1, "xfailed"),
        ("beta", "later", 1, "skipped"),
    ]
    assert rows[4]["tags"] == ["smoke", "handoff"] and rows[2]["tokens"] == 300
    assert "golden/alpha/cases.yaml:3" in page
    for title in (
        "Score distribution",
        "Latency per trial",
        "Tokens per trial",
        "Pass rate by suite",
    ):
        assert f">{title}</title>" in page
    assert page.count('<svg role="img"') == 4


def test_details_hold_input_scores_output_and_the_trace(reports: SimpleNamespace) -> None:
    details = _embedded(reports.page.read_text(), "case-data")
    assert len(details) == 7
    xss = details[2]
    assert xss["input"] == "question for xss-case"
    assert xss["output"] == f"Final: {XSS_TEXT}"
    assert xss["scores"][0]["reason"] == XSS_TEXT
    (run,) = xss["runs"]
    kinds = [item["kind"] for item in run["items"]]
    assert kinds == ["llm", "tool", "llm"]
    first_call, tool_call = run["items"][0], run["items"][1]
    assert [m["role"] for m in first_call["request"]["added"]] == ["system", "user"]
    assert first_call["tool_calls"][0]["name"] == "lookup"
    assert orjson.loads(tool_call["result"])["note"] == XSS_TEXT
    assert tool_call["result_kind"] == "ok"
    second = run["items"][2]["request"]
    assert second["kept"] and [m["role"] for m in second["added"]] == ["assistant", "tool"]
    handoff = details[4]
    assert [r["agent"] for r in handoff["runs"]] == ["desk", "helper"]
    assert any(item["kind"] == "handoff" for item in handoff["runs"][0]["items"])
    assert details[3]["runs"] == [] and details[3]["error"].startswith("no cassette")


def test_payloads_never_appear_as_markup(reports: SimpleNamespace) -> None:
    for path in (reports.page, reports.diff):
        page = path.read_text()
        for payload in PAYLOADS:
            assert payload not in page
        # JSON inside scripts uses \u003c escapes, so no data can close a script tag
        for block in re.findall(r"<script[^>]*>(.*?)</script>", page, re.S):
            assert "<" not in block or block.lstrip().startswith("//")
    page = reports.page.read_text()
    assert str(escape(PAYLOADS[2])) in page  # the gate reason, as text


def test_content_security_policy_allows_only_the_inline_code(reports: SimpleNamespace) -> None:
    page = reports.page.read_text()
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert policy is not None
    csp = html.unescape(policy.group(1))
    assert csp.startswith("default-src 'none';") and "img-src data:" in csp
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    code = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(code) == 1
    assert f"style-src {csp_source(style)};" in csp
    assert f"script-src {csp_source(code[0])};" in csp
    assert "http://" not in page and "https://" not in page


def test_script_json_escapes_what_could_end_a_script() -> None:
    value = {"a": "</script><b>&", "line": "x\u2028y\u2029z"}
    text = str(script_json(value))
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert orjson.loads(text) == value


def test_comparison_section_aligns_steps_and_marks_the_first_divergence(
    reports: SimpleNamespace,
) -> None:
    for path in (reports.page, reports.diff):
        page = path.read_text()
        assert "Compared with baseline" in page
        assert "−25.0%" in page or "-25.0%" in page
        assert "95% CI -60.0% to +10.0%" in page
        assert "Newly failing (1)" in page
        assert page.count('class="diff first"') == 1
        assert "tool_result_changed" in page
        assert "1 case(s) unchanged" in page


def test_comparison_renders_with_only_the_required_keys(tmp_path: Path) -> None:
    minimal = {
        "baseline_eval": "a",
        "current_eval": "b",
        "cases": [
            {"suite": "s", "case_id": "c", "kind": "flaky"},
            {"kind": "something_new", "steps": {"current": [{"kind": "run_end"}]}},
        ],
    }
    path = write_diff_report(None, minimal, tmp_path)
    page = path.read_text()
    assert "Flaky (1)" in page and "Other changes (1)" in page and "extra_step" in page


def test_report_cli_renders_latest(reports: SimpleNamespace, tmp_path: Path, capsys) -> None:
    db = str(reports.store.path)
    assert main(["report", "latest", "--db", db, "--report-dir", str(tmp_path)]) == 0
    assert (tmp_path / "eval_cur" / "index.html").is_file()
    assert "report of eval eval_cur" in capsys.readouterr().out
    assert main(["report", "eval_nope", "--db", db, "--report-dir", str(tmp_path)]) == 2
    assert "no eval 'eval_nope'" in capsys.readouterr().err
    # --out, the option's old name, still works, says it is deprecated, and is not advertised.
    assert main(["report", "latest", "--db", db, "--out", str(tmp_path / "old")]) == 0
    assert (tmp_path / "old" / "eval_cur" / "index.html").is_file()
    assert "--out is deprecated; use --report-dir" in capsys.readouterr().err
    assert main(["report", "--help"]) == 0
    assert "--out" not in capsys.readouterr().out


def test_render_report_of_unknown_eval_names_the_store(reports: SimpleNamespace) -> None:
    with pytest.raises(Exception, match="no eval 'missing'"):
        render_report(reports.store, "missing")
