"""The eval summary a person reads at the end of `agentbench run`, and the progress bar.

Plain text on purpose: it lands in CI logs. Failing cases come first after the totals, each
with its file and line and the reasons its scorers gave.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agentbench.commands.render import table
from agentbench.evals.compare_text import MAX_LISTED, drift_text
from agentbench.evals.stats import TrialOutcome


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def render(run: Any, store_path: Path, *, fail_under: float | None = None) -> str:
    summary = run.summary
    version = run.code_version or "unknown code version"
    lines = [
        f"eval {run.eval_id}: {summary.cases} cases, {summary.trials} trials ({version})"
        + (f", {run.resumed} resumed" if run.resumed else ""),
        "",
    ]
    rows = []
    for suite, numbers in summary.by_suite.items():
        mine = [o for o in run.outcomes if o.suite == suite]
        rows.append(
            [
                suite,
                len({o.case_id for o in mine}),
                sum(o.status == "passed" for o in mine),
                sum(o.status in ("failed", "error") for o in mine),
                sum(o.status in ("xfailed", "xpassed") for o in mine),
                sum(o.status == "skipped" for o in mine),
                _rate(numbers["pass_rate"]),
            ]
        )
    lines.append(
        table(["suite", "cases", "passed", "failed", "xfail", "skipped", "pass rate"], rows)
    )
    lines.append("")
    lines.append(
        f"pass rate {_rate(summary.pass_rate)}   pass@{summary.k} {_rate(summary.pass_at_k)}   "
        f"pass^{summary.k} {_rate(summary.pass_hat_k)}"
        + (f"   (gate: {fail_under:.0%})" if fail_under is not None else "")
    )
    cost = "—" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"
    lines.append(
        f"tokens {summary.tokens:,}   cost {cost}   latency p50 {_ms(summary.latency_p50_ms)}   "
        f"p95 {_ms(summary.latency_p95_ms)}"
    )
    if summary.scorer_means:
        means = ", ".join(f"{name} {mean:.2f}" for name, mean in summary.scorer_means.items())
        lines.append(f"scorers (mean): {means}")
    slowest = sorted(
        (o for o in run.outcomes if o.status != "skipped"), key=lambda o: -o.duration_ms
    )[:3]
    if slowest:
        lines.append(
            "slowest: " + ", ".join(f"{o.suite}/{o.case_id} {_ms(o.duration_ms)}" for o in slowest)
        )
    failing = [o for o in run.outcomes if o.status in ("failed", "error")]
    if failing:
        lines.append("")
        lines.append(f"failing ({len(failing)}):")
        lines.extend(_failure(o) for o in failing)
    reported = [o for o in run.outcomes if o.drifts and not o.drift_failed]
    if reported:
        lines.append("")
        lines.append(f"request drift, reported and not counted ({len(reported)} trial(s)):")
        for outcome in reported[:MAX_LISTED]:
            lines.append(f"  {outcome.suite}/{outcome.case_id} trial {outcome.trial}")
            lines.append(f"    - {drift_text(outcome)}")
            if outcome.continued_live:
                lines.append(f"    - {outcome.divergence_verdict()}")
        if len(reported) > MAX_LISTED:
            lines.append(f"  … and {len(reported) - MAX_LISTED} more")
    expected = [o for o in run.outcomes if o.status in ("xfailed", "xpassed")]
    if expected:
        lines.append("")
        lines.append("expected failures:")
        for outcome in expected:
            note = "passed unexpectedly" if outcome.status == "xpassed" else outcome.error
            lines.append(f"  {outcome.suite}/{outcome.case_id}: {note}")
    for error in run.suite_errors:
        lines.append(f"suite error: {error}")
    lines.append("")
    lines.append(f"results: {store_path} (eval {run.eval_id})")
    return "\n".join(lines)


def _failure(outcome: TrialOutcome) -> str:
    where = f" ({outcome.source})" if outcome.source else ""
    head = f"  {outcome.suite}/{outcome.case_id} trial {outcome.trial}{where}"
    reasons = [outcome.error] if outcome.error else outcome.reasons()
    return head + "".join(f"\n    - {reason}" for reason in reasons)


@contextlib.contextmanager
def progress(total: int, *, enabled: bool) -> Iterator[Callable[[TrialOutcome], None] | None]:
    """A rich progress bar with ETA on a terminal; nothing in CI logs."""
    if not enabled or total < 2:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task("cases", total=total)

        def tick(outcome: TrialOutcome) -> None:
            bar.update(task, advance=1, description=f"{outcome.suite}/{outcome.case_id}")

        yield tick
