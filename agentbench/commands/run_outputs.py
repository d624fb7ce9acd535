"""What `agentbench run` leaves behind once the eval is stored: the verdict and its outputs.

`judge` picks the baseline (saying which and why), compares and applies the gate; `write_outputs`
writes the JUnit file, the Markdown summaries, the annotations and the HTML report; `show`
prints the summary (or JSON). Each step is guarded on its own: a comparison that fails still
leaves the JUnit file and the report of the eval, and a report that cannot be written still
leaves the JUnit file — the failure is kept and raised after everything that could be written
was, so CI always has something to attach.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from agentbench.ci import (
    append_github_step_summary,
    github_annotations,
    markdown_summary,
    write_junit,
    write_summary_md,
)
from agentbench.commands import summary as summary_text
from agentbench.evals.baseline import find_baseline
from agentbench.evals.compare import Comparison, compare_evals
from agentbench.evals.compare_text import comparison_text
from agentbench.evals.gate import gate
from agentbench.report import write_report

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Verdict:
    """The gate's answer, the comparison behind it, and the baseline chosen (and why)."""

    gate_failed: bool
    comparison: Comparison | None = None
    baseline_note: str | None = None
    failure: Exception | None = None  # the comparison could not be made


@dataclass
class Written:
    """Where the outputs went, and what could not be written."""

    report: Path | None = None
    junit: Path | None = None
    summary_md: Path | None = None
    failures: list[Exception] = field(default_factory=list)


def judge(
    store: Any,
    result: Any,
    baseline_id: str | None,
    spec: str | None,
    *,
    repo: Path,
    budget_pct: float,
    fail_under: float | None,
    fail_on_change: bool = False,
) -> Verdict:
    """Compare with the baseline when there is one; the gate follows from it, or from the eval."""
    summary = result.summary
    # Without a comparison the eval's own rule: a threshold, or every counted case passes.
    if fail_under is not None:
        fallback, _ = gate(None, fail_under=fail_under, current_pass_rate=summary.pass_rate)
    else:
        fallback = summary.failed > 0 or summary.errors > 0
    try:
        if baseline_id is not None:
            note = f"baseline {baseline_id} (--against: the suites run at that ref)"
        else:
            found = find_baseline(store, spec, current_eval_id=result.eval_id, repo=repo)
            baseline_id, note = found.eval_id, found.note
        if baseline_id is None:
            rule = (
                f"the pass rate must reach {fail_under:.0%}"
                if fail_under is not None
                else ("every case must pass")
            )
            if fail_on_change:
                rule += " (--fail-on-change has no baseline to compare behaviour with)"
            return Verdict(fallback, baseline_note=f"{note}; gating without one: {rule}")
        comparison = compare_evals(
            store,
            baseline_id,
            result.eval_id,
            budget_pct=budget_pct,
            fail_under=fail_under,
            fail_on_change=fail_on_change,
        )
    except Exception as exc:  # the eval is stored; the outputs are still written
        return Verdict(fallback, failure=exc)
    return Verdict(comparison.gate_failed, comparison, note)


def write_outputs(
    store: Any,
    result: Any,
    verdict: Verdict,
    *,
    report_dir: Path | None,
    junit: Path | None,
    summary_md: Path | None,
) -> Written:
    """JUnit, Markdown summaries and annotations first (cheap, and what CI reads), the HTML
    report last; one that fails does not keep the others from being written."""
    written = Written()
    comparison = verdict.comparison
    gate_failed = verdict.gate_failed

    def attempt(action: Any) -> Any:
        try:
            return action()
        except Exception as exc:
            written.failures.append(exc)
            return None

    if junit is not None:
        attempt(lambda: write_junit(junit, result.outcomes))
        written.junit = junit.absolute()
    if summary_md is not None:
        attempt(lambda: write_summary_md(summary_md, result, comparison, gate_failed=gate_failed))
        written.summary_md = summary_md.absolute()
    attempt(
        lambda: append_github_step_summary(
            markdown_summary(result, comparison, gate_failed=gate_failed)
        )
    )
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in attempt(lambda: github_annotations(result.outcomes, comparison)) or ():
            click.echo(line)
    if report_dir is not None:
        data = comparison.as_dict() if comparison is not None else None
        gate = _own_gate(result, verdict) if comparison is None else None
        path = attempt(
            lambda: write_report(store, result.eval_id, report_dir, comparison=data, gate=gate)
        )
        written.report = Path(path).absolute() if path is not None else None
    return written


def _own_gate(result: Any, verdict: Verdict) -> dict[str, Any] | None:
    """The verdict for the report's banner when no baseline was compared and the gate did not
    follow the every-case-passes rule the report applies by itself (`--fail-under`)."""
    summary = result.summary
    if verdict.gate_failed == (summary.failed > 0 or summary.errors > 0):
        return None
    rate = f"pass rate {summary.pass_rate:.1%}" if summary.pass_rate is not None else "no rate"
    reasons = [f"{rate}: under the threshold"] if verdict.gate_failed else []
    return {"failed": verdict.gate_failed, "reasons": reasons, "basis": verdict.baseline_note}


def show(
    result: Any,
    verdict: Verdict,
    written: Written,
    *,
    store_path: Path,
    fail_under: float | None,
    as_json: bool,
) -> None:
    """The summary a person reads (or the JSON a script does)."""
    comparison = verdict.comparison
    if as_json:
        document = {
            "eval_id": result.eval_id,
            "store": str(store_path),
            "report": str(written.report) if written.report else None,
            "junit": str(written.junit) if written.junit else None,
            "summary_md": str(written.summary_md) if written.summary_md else None,
            "summary": result.summary.as_dict(),
            "baseline": verdict.baseline_note,
            "comparison": comparison.as_dict() if comparison is not None else None,
            "gate_failed": verdict.gate_failed,
            "suite_errors": result.suite_errors,
            "results": [dict(o.__dict__) for o in result.outcomes],
        }
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str).decode())
        return
    click.echo(summary_text.render(result, store_path, fail_under=fail_under))
    if verdict.baseline_note:
        click.echo("")
        click.echo(verdict.baseline_note)
    if comparison is not None:
        click.echo(comparison_text(comparison))
    for label, path in (
        ("junit", written.junit),
        ("summary", written.summary_md),
        ("report", written.report),
    ):
        if path is not None:
            click.echo(f"{label}: {path}")


def gate_options(command: F) -> F:
    """The options of a gate and its outputs, shared by `run` (which gates the eval it runs)
    and `gate` (which gates a stored one), so both read the same."""
    options = [
        click.option(
            "--fail-under",
            type=click.FloatRange(0, 1),
            default=None,
            metavar="RATE",
            help="Gate on the pass rate (0-1) instead of on every case passing.",
        ),
        click.option(
            "--baseline",
            default=None,
            metavar="EVAL_ID|latest|git:REF",
            help="Compare with this stored eval [default: the latest eval of the merge-base].",
        ),
        click.option(
            "--budget-pct",
            type=click.FloatRange(min=0),
            default=20.0,
            show_default=True,
            help="Tokens, cost or latency worse than this percentage is a budget regression.",
        ),
        click.option(
            "--fail-on-change",
            is_flag=True,
            help="With a baseline: fail the gate when any case's trajectory differs from the "
            "baseline's, scores equal or not (for upgrades that must not change behaviour).",
        ),
        click.option(
            "--junit",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write a JUnit XML file (one testcase per case and trial).",
        ),
        click.option(
            "--summary-md",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).",
        ),
        click.option(
            "--report-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Where the HTML report is written (<dir>/<eval_id>/index.html) "
            "[default: reports/ in the repository holding the suites].",
        ),
        click.option("--no-report", is_flag=True, help="Do not write the HTML report."),
        click.option(
            "--json", "as_json", is_flag=True, help="Print the summary and results as JSON."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command
