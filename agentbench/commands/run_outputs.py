"""What `agentbench run` and `agentbench gate` leave behind once the eval is stored: the
verdict and its outputs.

`judge` picks the baseline (saying which and why), compares, and reaches the one verdict
(`evals.comparing.verdict.decide`); `write_outputs` writes the JUnit file, the Markdown summaries,
the annotations and the HTML report; `show` prints the summary (or JSON) and the `gate: …` line;
`conclude` does the three in turn for both commands. All of them render that one verdict, and
the command exits with its code. Each step is guarded
on its own: a comparison that fails still leaves the JUnit file and the report of the eval (the
verdict is then an error), and a report that cannot be written still leaves the JUnit file —
the failure is kept and raised after everything that could be written was, so CI always has
something to attach.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from agentbench.commands.options import Gating, Outputs
from agentbench.evals.comparing.baseline import find_baseline
from agentbench.evals.comparing.compare import compare_evals
from agentbench.evals.comparing.compare_text import comparison_text
from agentbench.evals.comparing.comparison import Comparison
from agentbench.evals.comparing.gate import StrictXfail
from agentbench.evals.comparing.verdict import ERROR, EXIT_USAGE, GateRules, Verdict, decide
from agentbench.evals.running.completion import completion_of
from agentbench.evals.running.shards import Shard, ShardSet
from agentbench.evals.storage.results_store import eval_config, keep_verdict
from agentbench.report import write_report
from agentbench.trace.errors import StoreReadOnlyError


@dataclass
class Written:
    """Where the outputs went, and what could not be written."""

    report: Path | None = None
    junit: Path | None = None
    summary_md: Path | None = None
    failures: list[Exception] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was left out, and why


def conclude(
    store: Any,
    result: Any,
    gating: Gating,
    outputs: Outputs,
    *,
    repo: Path,
    reports: Path,
    against_id: str | None = None,
    shard: Shard | None = None,
) -> int:
    """Judge the stored eval, write every output, show the verdict, and return the exit code
    (`finish`): the end of both `run` and `gate`. `reports` is the HTML report's folder when
    `--report-dir` is not given; the rest as `judge` says."""
    verdict = judge(store, result, gating, repo=repo, against_id=against_id, shard=shard)
    written = write_outputs(
        store, result, verdict, outputs, report_dir=outputs.report_folder(reports)
    )
    show(
        result,
        verdict,
        written,
        store_path=store.path,
        fail_under=gating.fail_under,
        as_json=outputs.as_json,
    )
    return finish(verdict, written)


def judge(
    store: Any,
    result: Any,
    gating: Gating,
    *,
    repo: Path,
    against_id: str | None = None,
    shard: Shard | None = None,
) -> Verdict:
    """The eval's one verdict: compared with the baseline when there is one (`against_id`, the
    eval `--against` ran, else the one `gating.baseline` names or the default), never for a
    shard of a CI matrix (`shard`: it is judged on its own trials)."""
    config = eval_config(store, result.eval_id)
    fail_under, fail_on_change = gating.fail_under, gating.fail_on_change
    strict_xfail = StrictXfail.of(gating.strict_xfail, config)
    rules = GateRules(fail_under, fail_on_change, strict_xfail)
    # A stored eval that did not finish is an error, whatever else is said of it.
    completion = completion_of(
        store, result.eval_id, held=result.summary.trials, suite_errors=len(result.suite_errors)
    )
    comparison: Comparison | None = None
    note: str | None = None
    failure: Exception | None = None
    if shard is None:
        try:
            baseline_id = against_id
            if baseline_id is not None:
                note = f"baseline {baseline_id} (--against: the suites run at that ref)"
            else:
                found = find_baseline(
                    store, gating.baseline, current_eval_id=result.eval_id, repo=repo
                )
                baseline_id, note = found.eval_id, found.note
            if baseline_id is not None:
                comparison = compare_evals(
                    store,
                    baseline_id,
                    result.eval_id,
                    budget_pct=gating.budget_pct,
                    fail_under=fail_under,
                    fail_on_change=fail_on_change,
                    strict_xfail=gating.strict_xfail,
                )
            elif fail_on_change:
                note += " (--fail-on-change has no baseline to compare behaviour with)"
        except Exception as exc:  # the eval is stored; the outputs are still written
            failure = exc
    return decide(
        result.summary,
        result.outcomes,
        rules=rules,
        suite_errors=result.suite_errors,
        comparison=comparison,
        baseline_note=note,
        failure=failure,
        shards=ShardSet.of(config.get("shards")),
        part=shard,
        completion=completion,
    )


def write_outputs(
    store: Any,
    result: Any,
    verdict: Verdict,
    outputs: Outputs,
    *,
    report_dir: Path | None,
) -> Written:
    """The verdict kept with the eval (for reports made later), JUnit, Markdown summaries and
    annotations (cheap, and what CI reads), the HTML report last (into `report_dir`, none
    when None); one that fails does not keep the others from being written."""
    written = Written()
    junit, summary_md = outputs.junit, outputs.summary_md
    comparison = verdict.comparison

    def attempt(action: Any) -> Any:
        try:
            return action()
        except Exception as exc:
            written.failures.append(exc)
            return None

    try:
        keep_verdict(store, result.eval_id, verdict.as_dict())
    except StoreReadOnlyError as fault:  # `gate` of a store it may only read: judged all the same
        written.notes.append(
            f"the verdict is not kept with the eval: {fault.headline} (a report made later "
            "judges the eval without a baseline)"
        )
    except Exception as exc:
        written.failures.append(exc)
    if junit is not None:
        attempt(lambda: write_junit(junit, result.outcomes, verdict=verdict))
        written.junit = junit.absolute()
    # `--summary-md $GITHUB_STEP_SUMMARY` names the step summary itself: it is appended to
    # once, and the earlier steps' summaries in it are kept.
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_md is not None:
        if not (step_summary and Path(step_summary).resolve() == summary_md.resolve()):
            attempt(lambda: write_summary_md(summary_md, result, comparison, verdict=verdict))
        written.summary_md = summary_md.absolute()
    attempt(
        lambda: append_github_step_summary(markdown_summary(result, comparison, verdict=verdict))
    )
    if os.environ.get("GITHUB_ACTIONS") == "true":
        lines = attempt(lambda: github_annotations(result.outcomes, comparison, verdict=verdict))
        for line in lines or ():
            click.echo(line, err=outputs.as_json)  # with --json, stdout holds the document alone
    if report_dir is not None:
        data = comparison.as_dict() if comparison is not None else None
        path = attempt(
            lambda: write_report(
                store, result.eval_id, report_dir, comparison=data, gate=verdict.as_dict()
            )
        )
        written.report = Path(path).absolute() if path is not None else None
    return written


def show(
    result: Any,
    verdict: Verdict,
    written: Written,
    *,
    store_path: Path,
    fail_under: float | None,
    as_json: bool,
) -> None:
    """The summary a person reads (or the JSON a script does), ending with the verdict; with
    `--json` the `gate: …` lines go to stderr, so a log still shows them (and notes on
    outputs left out, always)."""
    for note in written.notes:
        click.echo(f"note: {note}", err=True)
    comparison = verdict.comparison
    if as_json:
        document = {
            "eval_id": result.eval_id,
            "store": str(store_path),
            "report": str(written.report) if written.report else None,
            "junit": str(written.junit) if written.junit else None,
            "summary_md": str(written.summary_md) if written.summary_md else None,
            "summary": result.summary.as_dict(),
            "baseline": verdict.notes[0] if verdict.notes else None,
            "comparison": comparison.as_dict() if comparison is not None else None,
            "verdict": verdict.as_dict(),
            "gate_failed": not verdict.passed,
            "suite_errors": result.suite_errors,
            "results": [dict(o.__dict__) for o in result.outcomes],
        }
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str).decode())
        click.echo(verdict.text(), err=True)
        return
    click.echo(summary_text.render(result, store_path, fail_under=fail_under, verdict=verdict))
    if comparison is not None:
        click.echo("")
        click.echo(comparison_text(comparison, gate=False))
    for label, path in (
        ("junit", written.junit),
        ("summary", written.summary_md),
        ("report", written.report),
    ):
        if path is not None:
            click.echo(f"{label}: {path}")
    click.echo("")
    click.echo(verdict.text())


def nothing_runnable(errors: list[str]) -> Verdict:
    """The verdict when no suite could be loaded at all: an error (exit 2), with no eval."""
    # Each error was printed whole just before; the verdict names each by its first line.
    reasons = [f"suite error: {e.strip().splitlines()[0]}" for e in errors if e.strip()]
    reasons = reasons or ["no suite found under the paths given"]
    return Verdict(ERROR, EXIT_USAGE, reasons, "no suite could run, so nothing was judged")


def finish(verdict: Verdict, written: Written) -> int:
    """The command's exit code, once every output is out: a comparison or output that failed
    is raised (the CLI maps it to its code), else the verdict's."""
    for problem in (verdict.failure, *written.failures):
        if problem is not None:
            raise problem
    return verdict.exit_code
