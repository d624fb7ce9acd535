"""The eval summary a person reads at the end of `agentbench run`, and the progress bar.

Plain text on purpose: it lands in CI logs. Failing cases come first after the totals, each
with its file and line and the reasons its scorers gave, then the trials that could not run
(a missing cassette, a live model that failed: not failures of the code), with their error.
"""

from __future__ import annotations

import contextlib
import heapq
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench.commands.render import table
from agentbench.evals.comparing.compare_text import MAX_LISTED, drift_text
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.terminal import escaped, raw_stream


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def render(
    run: Any, store_path: Path, *, fail_under: float | None = None, verdict: Any = None
) -> str:
    """The eval's summary; `verdict` (an `evals.comparing.verdict.Verdict`) says whose XPASS
    fails."""
    summary = run.summary
    version = run.code_version or "unknown code version"
    lines = [
        f"eval {run.eval_id}: {summary.cases} cases, {summary.trials} trials ({version})"
        + (f", {run.resumed} resumed" if run.resumed else ""),
        "",
    ]
    lines.append(_suite_table(summary))
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
    listed = _Listed.of(run.outcomes)
    slowest = listed.slowest
    if slowest:
        lines.append(
            "slowest: " + ", ".join(f"{o.suite}/{o.case_id} {_ms(o.duration_ms)}" for o in slowest)
        )
    for title, trials in (("failing", listed.failing), ("could not run", listed.errors)):
        if trials:
            lines.append("")
            lines.append(f"{title} ({len(trials)}):")
            lines.extend(_failure(o) for o in trials)
    reported = listed.drifted
    if listed.drifted_count:
        lines.append("")
        lines.append(f"request drift, reported and not counted ({listed.drifted_count} trial(s)):")
        for outcome in reported:
            lines.append(f"  {outcome.suite}/{outcome.case_id} trial {outcome.trial}")
            lines.append(f"    - {drift_text(outcome)}")
            if outcome.continued_live:
                lines.append(f"    - {outcome.divergence_verdict()}")
        if listed.drifted_count > MAX_LISTED:
            lines.append(f"  … and {listed.drifted_count - MAX_LISTED} more")
    lines.extend(_expected(listed.expected, verdict))
    lines.extend(_skipped(run.outcomes))
    for error in run.suite_errors:
        lines.append(f"suite error: {error}")
    lines.append("")
    lines.append(f"results: {store_path} (eval {run.eval_id})")
    return "\n".join(lines)


def _skipped(outcomes: Iterable[TrialOutcome]) -> list[str]:
    """The skipped trials, one line per reason (a suite whose framework is not installed
    skips all its cases for one reason)."""
    reasons: dict[str, list[str]] = {}
    for outcome in outcomes:
        if outcome.status == "skipped":
            reasons.setdefault(outcome.error or "skipped", []).append(
                f"{outcome.suite}/{outcome.case_id}"
            )
    lines = []
    for reason, cases in reasons.items():
        named = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
        lines += ["", f"skipped ({len(cases)}): {named}: {reason}"]
    return lines


def _expected(expected: list[TrialOutcome], verdict: Any) -> list[str]:
    """The expected failures, an unexpected pass (XPASS) saying whether it fails the gate."""
    if not expected:
        return []
    lines = ["", "expected failures:"]
    for outcome in expected:
        note = outcome.error
        if outcome.status == "xpassed":
            strict = verdict is not None and verdict.xpass_fails(outcome.suite)
            note = "XPASS, passed unexpectedly" + (
                " (strict: it fails the gate)"
                if strict
                else " (reported; --strict-xfail or strict_xfail: true would fail the gate)"
            )
        lines.append(f"  {outcome.suite}/{outcome.case_id}: {note}")
    return lines


def _suite_table(summary: Any) -> str:
    """Per suite: cases, trials passed, failed, could not run (a column only when some did:
    they are not failures of the code), expected failures, skipped, the pass rate."""
    errors = summary.errors > 0
    rows = [
        [
            suite,
            numbers.get("cases", 0),
            numbers["passed"],
            numbers.get("failed", 0),
            *([numbers.get("errors", 0)] if errors else []),
            numbers.get("expected", 0),
            numbers.get("skipped", 0),
            _rate(numbers["pass_rate"]),
        ]
        for suite, numbers in summary.by_suite.items()
    ]
    headers = ["suite", "cases", "passed", "failed", *(["errors"] if errors else [])]
    return table([*headers, "xfail", "skipped", "pass rate"], rows)


@dataclass
class _Listed:
    """The trials the summary names, found in one pass: an eval's outcomes may be a spool
    read back from disk, so each pass costs a read of every trial."""

    slowest: list[TrialOutcome] = field(default_factory=list)
    failing: list[TrialOutcome] = field(default_factory=list)
    errors: list[TrialOutcome] = field(default_factory=list)  # trials that could not run
    drifted: list[TrialOutcome] = field(default_factory=list)  # the first MAX_LISTED
    drifted_count: int = 0
    expected: list[TrialOutcome] = field(default_factory=list)

    @classmethod
    def of(cls, outcomes: Iterable[TrialOutcome]) -> _Listed:
        listed = cls()
        timed: list[tuple[float, int, TrialOutcome]] = []  # a heap of the 3 slowest
        for index, outcome in enumerate(outcomes):
            status = outcome.status
            if status != "skipped":
                # Ties keep the earlier trial, as a stable sort by duration would.
                item = (outcome.duration_ms, -index, outcome)
                if len(timed) < 3:
                    heapq.heappush(timed, item)
                elif item[:2] > timed[0][:2]:
                    heapq.heapreplace(timed, item)
            if status == "failed":
                listed.failing.append(outcome)
            elif status == "error":
                listed.errors.append(outcome)
            elif status in ("xfailed", "xpassed"):
                listed.expected.append(outcome)
            if outcome.drifts and not outcome.drift_failed:
                listed.drifted_count += 1
                if len(listed.drifted) < MAX_LISTED:
                    listed.drifted.append(outcome)
        listed.slowest = [o for _, _, o in sorted(timed, key=lambda t: t[:2], reverse=True)]
        return listed


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
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    # The bar draws with control codes of its own, so it writes to the terminal itself (not
    # through the CLI's escaping stdout), and leaves whatever else is printed meanwhile to go
    # the escaped way; a case's name in it is escaped like any other text.
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(file=raw_stream(sys.stdout)),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as bar:
        task = bar.add_task("cases", total=total)

        def tick(outcome: TrialOutcome) -> None:
            name = escaped(f"{outcome.suite}/{outcome.case_id}")
            bar.update(task, advance=1, description=escape(name))

        yield tick
