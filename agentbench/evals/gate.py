"""The regression gate: should this eval fail the build, and why (in sentences naming cases).

Four things fail it: the pass rate is under `--fail-under`; a case that passed in the baseline
fails now (unless its trials disagree — a flaky case is reported, never gating, so one unlucky
trial does not block a merge); a failing case that no clean baseline excuses (it is new, or
the baseline that failed it too ran uncommitted code); or the pass rate dropped significantly
(sign test p < 0.05). With `--fail-on-change` (a framework upgrade that must not change
behaviour) a fifth does: any case whose trajectory differs from the baseline's, scores equal
or not.
Budget regressions, score changes, behaviour changes (without `--fail-on-change`) and cases
that were already failing are reported elsewhere and do not gate here; `agentbench run`
without a baseline keeps its own rule (any failure).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentbench.evals.case_changes import CaseChange
    from agentbench.evals.compare import Comparison


REASON_CHARS = 160  # a gate reason quotes the case's first failing reason, cut to this


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _points(value: float) -> str:
    return f"{value * 100:+.1f}".replace("-", "−")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def gate(
    comparison: Comparison | None,
    *,
    fail_under: float | None,
    fail_on_change: bool = False,
    current_pass_rate: float | None = None,
) -> tuple[bool, list[str]]:
    """(failed, reasons). `current_pass_rate` defaults to the comparison's current rate."""
    reasons: list[str] = []
    rate = current_pass_rate
    if rate is None and comparison is not None:
        rate = comparison.current_rate
    if fail_under is not None and rate is not None and rate < fail_under:
        reasons.append(f"The pass rate {_pct(rate)} is under the required {_pct(fail_under)}.")
    if comparison is None:
        return bool(reasons), reasons
    for change in comparison.cases:
        reason = _failing_reason(change, dirty_baseline=comparison.baseline_dirty)
        if reason is not None:
            reasons.append(reason)
    if comparison.significant_drop:
        low, high = comparison.ci95 or (None, None)
        interval = (
            f", 95% CI [{_points(low)}, {_points(high)}] points"
            if low is not None and high is not None
            else ""
        )
        assert comparison.delta is not None and comparison.p_value is not None
        reasons.append(
            f"The pass rate dropped significantly, {_pct(comparison.baseline_rate)} → "
            f"{_pct(comparison.current_rate)} ({_points(comparison.delta)} points{interval}; "
            f"sign test p = {comparison.p_value:.3g} over {comparison.paired_cases} paired cases)."
        )
    if fail_on_change:
        changed = _changed_behaviour(comparison.cases)
        if changed:
            reasons.append(_change_reason(changed))
    return bool(reasons), reasons


def _changed_behaviour(cases: list[CaseChange]) -> list[CaseChange]:
    """Cases both evals ran whose trajectories differ, in the comparison's order."""
    return [c for c in cases if c.baseline is not None and c.current is not None and c.divergences]


def _change_reason(changed: list[CaseChange]) -> str:
    first = changed[0]
    where = f" ({first.source})" if first.source else ""
    d = first.divergences[0]
    return (
        f"{len(changed)} case(s) changed behaviour (--fail-on-change); the first, "
        f"{first.name}{where}: {d.cls} at step {d.step} ({d.agent}), {_clip(d.label)}."
    )


def _failing_reason(change: CaseChange, *, dirty_baseline: bool) -> str | None:
    """Why this case fails the gate, or None: it passed in the baseline and fails now; or it
    fails and nothing excuses it — no baseline has it, or the baseline that failed it too ran
    uncommitted code (possibly this very change, evaluated before it was committed)."""
    now = change.current
    if now is None or not now.trials or now.passed_trials == now.trials or change.flaky:
        return None
    if change.kind == "newly_failing":
        why = "passed in the baseline and fails now"
    elif change.baseline is None:
        why = "fails and is not in the baseline"
    elif dirty_baseline and change.kind not in ("newly_passing",):
        why = (
            "fails now and failed in the baseline too, but the baseline ran uncommitted code, "
            "so that cannot excuse it"
        )
    else:
        return None  # already failing in a clean baseline: known, reported elsewhere
    detail = f": {_clip(change.reasons[0])}" if change.reasons else ""
    where = f" ({change.source})" if change.source else ""
    sentence = f"{change.name}{where} {why}{detail}"
    return sentence if sentence.endswith(("…", ".")) else sentence + "."
