"""The eval as markdown for CI: a PR comment, `--summary-md`, or GitHub's step summary.

The heading is the eval's verdict (✅ passed, ❌ gate failed, ⛔ error) and right under it
its reasons, what it was judged by and its notes (the baseline chosen, a partial eval), as
`run` and `gate` reached it (`evals.comparing.verdict`). Then totals per suite, then (with a
baseline) the pass-rate change with its interval and p-value and the changed cases by kind, then
every failing case with its file, line and reasons, the trials that could not run with their error,
and the unexpected passes (XPASS). GitHub refuses
a step summary over 1 MiB, so the document is kept under `MAX_SUMMARY_BYTES`: case lists are
shortened (with a note saying how many were left out) until it fits, and as a last resort the
text is cut at a line. The document is redacted before it is measured (outcomes are redacted
when scored; a comparison may quote a store written by an older version).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentbench.evals.comparing.compare_text import (
    XPASS_TITLE,
    as_data,
    describe_divergence,
    drift_text,
    not_compared_lines,
    pct,
    rate_line,
    trials_text,
)
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.comparing.verdict import ERROR, FAILED, PASSED, GateRules, Verdict, decide
from agentbench.trace.redaction.redactor import Redactor

MAX_SUMMARY_BYTES = 1_000_000  # GitHub's limit is 1 MiB (1,048,576 bytes) per step summary
_LIST_LIMITS = (None, 500, 100, 20, 5, 0)
_TITLES = (
    ("could_not_run", "Could not run now (not judged)"),
    ("newly_failing", "Newly failing"),
    ("xpassed", XPASS_TITLE),
    ("budget_regression", "Budget regressions (gating when both evals replayed the same usage)"),
    ("score_changed", "Score changes"),
    ("flaky", "Flaky (reported, not gating)"),
    ("behaviour_changed", "Behaviour changed, scores equal (gating only with --fail-on-change)"),
    ("usage_changed", "Tokens or cost changed, replayed (gating only with --fail-on-change)"),
    ("newly_passing", "Newly passing"),
    ("added", "Added (not in the baseline: reported, not gated)"),
    ("removed", "Removed (only in the baseline)"),
)


def cell(text: Any, limit: int = 300) -> str:
    """Text safe inside a table cell: one line, pipes and angle brackets escaped."""
    value = " ".join(str(text).split())
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return value.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def _capped(rows: Sequence[str], limit: int | None, what: str) -> list[str]:
    if limit is None or len(rows) <= limit:
        return list(rows)
    note = f"\n_… and {len(rows) - limit} more {what} (truncated to keep this summary under 1 MiB)_"
    return [*rows[:limit], note]


def _totals(run: Any) -> list[str]:
    summary = run.summary
    errors = summary.errors > 0  # trials that could not run: a column of their own
    lines = [
        f"| suite | cases | passed | failed |{' errors |' * errors} xfail | skipped | pass rate |",
        f"| --- | ---: | ---: | ---: |{' ---: |' * errors} ---: | ---: | ---: |",
    ]
    for suite, numbers in summary.by_suite.items():
        errored = f" {numbers.get('errors', 0)} |" if errors else ""
        lines.append(
            f"| {cell(suite)} | {numbers['cases']} | {numbers['passed']} "
            f"| {numbers['failed']} |{errored} {numbers['expected']} "
            f"| {numbers['skipped']} | {pct(numbers['pass_rate'])} |"
        )
    cost = "—" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"
    lines.append("")
    lines.append(
        f"**Pass rate {pct(summary.pass_rate)}** · pass@{summary.k} {pct(summary.pass_at_k)} · "
        f"pass^{summary.k} {pct(summary.pass_hat_k)} · tokens {summary.tokens:,} · cost {cost}"
    )
    return lines


def _case_row(case: dict[str, Any]) -> str:
    name = f"`{cell(case['suite'])}/{cell(case['case_id'])}`"
    if case.get("source"):
        name += f" ({cell(case['source'])})"
    reasons = "<br>".join(cell(r) for r in case["reasons"][:3])
    first = ""
    if case["divergences"]:
        first = cell(describe_divergence(case["divergences"][0], width=60))
    return f"| {name} | {cell(trials_text(case))} | {reasons} | {first} |"


def _verdict(verdict: Verdict, limit: int | None) -> list[str]:
    """The verdict's reasons, basis and notes, under the heading that names it."""
    words = {PASSED: "Gate passed", FAILED: "Gate failed", ERROR: "Gate error"}[verdict.status]
    exit_code = "" if verdict.passed else f" (exit {verdict.exit_code})"
    lines = ["", f"**{words}**{exit_code} — judged by: {cell(verdict.basis, 600)}"]
    if verdict.reasons:
        lines.append("")
        lines.extend(_capped([f"- {cell(r, 600)}" for r in verdict.reasons], limit, "reasons"))
    lines.extend(f"\n> {cell(note, 600)}" for note in verdict.notes)
    return lines


def _comparison(data: dict[str, Any], limit: int | None) -> list[str]:
    lines = ["", f"### Compared with `{cell(data['baseline_eval'])}`", "", rate_line(data)]
    for kind, title in _TITLES:
        found = [c for c in data["cases"] if c["kind"] == kind]
        if not found:
            continue
        lines += ["", f"#### {title} ({len(found)})", ""]
        lines.append("| case | trials | reasons | first divergence |")
        lines.append("| --- | --- | --- | --- |")
        lines.extend(_capped([_case_row(c) for c in found], limit, "cases"))
    unchanged = sum(c["kind"] == "unchanged" for c in data["cases"])
    if unchanged:
        lines += ["", f"{unchanged} case(s) unchanged."]
    lines += [cell(line, 600) for line in not_compared_lines(data)]
    return lines


def _failing(outcomes: Sequence[TrialOutcome], limit: int | None) -> list[str]:
    """The failing trials, then those that could not run (not failures of the code)."""
    lines = []
    for status, title, what in (
        ("failed", "Failing", "failing trials"),
        ("error", "Could not run", "trials that could not run"),
    ):
        found = [o for o in outcomes if o.status == status]
        if not found:
            continue
        rows = []
        for outcome in found:
            reasons = [outcome.error] if status == "error" else outcome.reasons()
            rows.append(
                f"| `{cell(outcome.suite)}/{cell(outcome.case_id)}` | {outcome.trial} "
                f"| {cell(outcome.source or '')} | {'<br>'.join(cell(r) for r in reasons if r)} |"
            )
        lines += [
            "",
            f"### {title} ({len(found)})",
            "",
            f"| case | trial | where | {'error' if status == 'error' else 'reasons'} |",
            "| --- | ---: | --- | --- |",
            *_capped(rows, limit, what),
        ]
    return lines


def _drift(outcomes: Sequence[TrialOutcome], limit: int | None) -> list[str]:
    """Request drift that did not fail its trial (--allow-drift): reported, so it is seen."""
    reported = [o for o in outcomes if o.drifts and not o.drift_failed]
    if not reported:
        return []
    rows = [
        f"| `{cell(o.suite)}/{cell(o.case_id)}` | {o.trial} | {cell(_drift_cell(o))} |"
        for o in reported
    ]
    return [
        "",
        f"### Request drift, reported and not counted ({len(reported)})",
        "",
        "| case | trial | drift |",
        "| --- | ---: | --- |",
        *_capped(rows, limit, "drifted trials"),
    ]


def _drift_cell(outcome: TrialOutcome) -> str:
    """The drift, and — when a live model took over there — that the rest is real."""
    text = drift_text(outcome) or ""
    if outcome.continued_live:
        text += f"; {outcome.divergence_verdict()}"
    return text


def _xpassed(outcomes: Sequence[TrialOutcome], verdict: Verdict, limit: int | None) -> list[str]:
    """Expected failures that passed: a failure in a strict suite, a note elsewhere."""
    rows = [
        f"| `{cell(o.suite)}/{cell(o.case_id)}` | {o.trial} | {cell(o.source or '')} "
        f"| {'fails the gate (strict)' if verdict.xpass_fails(o.suite) else 'reported'} |"
        for o in outcomes
        if o.status == "xpassed"
    ]
    if not rows:
        return []
    return [
        "",
        f"### XPASS: marked xfail, and passed ({len(rows)})",
        "",
        "| case | trial | where | gate |",
        "| --- | ---: | --- | --- |",
        *_capped(rows, limit, "unexpected passes"),
    ]


_HEADINGS = {PASSED: "✅ passed", FAILED: "❌ gate failed", ERROR: "⛔ error"}


def _render(run: Any, data: dict[str, Any] | None, verdict: Verdict, limit: int | None) -> str:
    summary = run.summary
    lines = [
        f"## agentbench: {_HEADINGS[verdict.status]}",
        "",
        f"Eval `{cell(run.eval_id)}` · {summary.cases} cases · {summary.trials} trials"
        + (f" · code `{cell(run.code_version)}`" if run.code_version else ""),
        *_verdict(verdict, limit),
        "",
        *_totals(run),
    ]
    if data is not None:
        lines += _comparison(data, limit)
    lines += _failing(run.outcomes, limit)
    lines += _xpassed(run.outcomes, verdict, limit)
    lines += _drift(run.outcomes, limit)
    for error in run.suite_errors:
        lines.append(f"\n> suite error: {cell(error, 600)}")
    return "\n".join(lines) + "\n"


def _verdict_without_one(run: Any, data: dict[str, Any] | None, failed: bool | None) -> Verdict:
    """For a caller with no verdict at hand (the library): the comparison's gate, or the
    `failed` given, or the rule without a baseline (`evals.comparing.verdict.decide`)."""
    if data is None and failed is None:
        return decide(run.summary, run.outcomes, rules=GateRules())
    if data is not None:
        reasons = [str(r) for r in data["gate"]["reasons"]]
        failed = data["gate"]["failed"] if failed is None else failed
        basis = f"compared with baseline {data['baseline_eval']}"
    else:
        reasons = []
        failed = run.summary.failed + run.summary.errors > 0 if failed is None else failed
        basis = "no baseline compared: every counted trial must pass"
    return Verdict(FAILED if failed else PASSED, int(bool(failed)), reasons, basis)


def markdown_summary(
    run: Any,
    comparison: Any = None,
    *,
    verdict: Verdict | None = None,
    gate_failed: bool | None = None,
    max_bytes: int = MAX_SUMMARY_BYTES,
) -> str:
    """Markdown for an `EvalRun` (and its comparison), at most `max_bytes` of UTF-8.

    `verdict` is what `run` and `gate` decided, and what the heading says; without one,
    `gate_failed` sets the heading, else the comparison's gate does, else whether any trial
    failed.
    """
    data = as_data(comparison) if comparison is not None else None
    if verdict is None:
        verdict = _verdict_without_one(run, data, gate_failed)
    redactor = Redactor()  # before the size cuts: a cut must not leave half a secret
    text = ""
    for limit in _LIST_LIMITS:
        text = redactor.document(_render(run, data, verdict, limit))
        if len(text.encode()) <= max_bytes:
            return text
    note = "\n\n_… summary cut to stay under the step summary size limit_\n"
    budget = max_bytes - len(note.encode())
    cut = text.encode()[:budget].decode(errors="ignore")
    return cut[: cut.rfind("\n")] + note if "\n" in cut else cut + note


def write_summary_md(
    path: str | Path,
    run: Any,
    comparison: Any = None,
    *,
    verdict: Verdict | None = None,
    gate_failed: bool | None = None,
) -> Path:
    """Write `markdown_summary` to `path` (creating its folder); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = markdown_summary(run, comparison, verdict=verdict, gate_failed=gate_failed)
    target.write_text(text, "utf-8")
    return target


def append_github_step_summary(markdown: str) -> Path | None:
    """Append to `$GITHUB_STEP_SUMMARY` when GitHub Actions set it; the file, or None."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return Path(target)
