"""The regression gate: should this eval fail the build, and why (in sentences naming cases).

These fail it: the pass rate is under `--fail-under`; a case that passed in the baseline
fails now (unless its trials disagree — a flaky case is reported, never gating, so one unlucky
trial does not block a merge); a failing case that no clean baseline excuses (it is new, the
baseline could not run it either, or the baseline that failed it too ran uncommitted code); a
case whose trials could not run now is worded so, never as "fails now" (`evals.comparing.verdict`
makes it an error of its own unless `--fail-under` counts it as a failure); the pass rate dropped
significantly (sign test p < 0.05); an expected failure that passed (XPASS) in a strict suite
(`--strict-xfail`, or `strict_xfail: true` in suite.yaml); and, when both evals replayed the
same recorded usage, a case over its tokens or cost budget — in replay the usage comes from
the recording, so a change there is the code's (how it reads or prices usage), not noise.
With `--fail-on-change` (a framework upgrade that must not change behaviour) any case whose
trajectory differs from the baseline's, or whose tokens or cost moved on the same recorded
usage, fails it too.
Budget regressions between live evals (noise), score changes, behaviour changes (without
`--fail-on-change`) and cases that were already failing are reported elsewhere and do not
gate here; without a baseline the eval's own rule applies (`evals.comparing.verdict`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from agentbench.evals.comparing.case_changes import CaseChange
from agentbench.evals.comparing.comparison import Comparison

REASON_CHARS = 160  # a gate reason quotes the case's first failing reason, cut to this


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _points(value: float) -> str:
    return f"{value * 100:+.1f}".replace("-", "−")


def clip(text: str) -> str:
    """`text` on one line, cut to REASON_CHARS."""
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


@dataclass(frozen=True)
class StrictXfail:
    """Whose unexpected passes (XPASS) fail the gate: every suite's (`--strict-xfail`), or
    those whose suite.yaml says `strict_xfail: true` (kept in the eval's config)."""

    every_suite: bool = False
    suites: frozenset[str] = frozenset()

    @classmethod
    def of(cls, option: bool, config: dict[str, Any] | None) -> StrictXfail:
        named = (config or {}).get("strict_xfail") or ()
        return cls(option, frozenset(str(s) for s in named))

    def applies(self, suite: str) -> bool:
        return self.every_suite or suite in self.suites

    def as_data(self) -> str | list[str]:
        return "every suite" if self.every_suite else sorted(self.suites)


def xpass_reason(name: str, source: str | None) -> str:
    """The gate's sentence for a strict suite's unexpected pass."""
    where = f" ({source})" if source else ""
    return (
        f"{name}{where} is marked xfail and passed (XPASS, strict): remove its xfail if it "
        "is fixed, or find out why its scorers let it pass."
    )


def gate(
    comparison: Comparison | None,
    *,
    fail_under: float | None,
    fail_on_change: bool = False,
    current_pass_rate: float | None = None,
    strict_xfail: StrictXfail | None = None,
    said: Collection[tuple[str, str]] = (),
) -> tuple[bool, list[str]]:
    """(failed, reasons). `current_pass_rate` defaults to the comparison's current rate;
    `said` are (suite, case) whose trials could not run and that the caller reports as
    errors of their own (`evals.comparing.verdict`), so they are not said twice."""
    reasons: list[str] = []
    rate = current_pass_rate
    if rate is None and comparison is not None:
        rate = comparison.current_rate
    if fail_under is not None and rate is not None and rate < fail_under:
        reasons.append(f"The pass rate {_pct(rate)} is under the required {_pct(fail_under)}.")
    if comparison is None:
        return bool(reasons), reasons
    strict = strict_xfail or StrictXfail()
    for change in comparison.cases:
        reasons += _case_reasons(change, comparison.baseline_dirty, strict, said)
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
        costlier = [c for c in comparison.cases if c.usage and c.same_recorded_usage]
        if costlier:
            first = costlier[0]
            where = f" ({first.source})" if first.source else ""
            reasons.append(
                f"{len(costlier)} case(s) changed tokens or cost on the same recorded usage "
                f"(--fail-on-change); the first, {first.name}{where}: {'; '.join(first.usage)}."
            )
    return bool(reasons), reasons


def _case_reasons(
    change: CaseChange, dirty_baseline: bool, strict: StrictXfail, said: Collection[Any]
) -> list[str]:
    """What fails the gate in one case: failing, a strict XPASS, over budget on the same
    recorded usage."""
    reasons = []
    if (change.suite, change.case_id) not in said:
        reason = _failing_reason(change, dirty_baseline=dirty_baseline)
        if reason is not None:
            reasons.append(reason)
    now = change.current
    if now is not None and now.xpassed_trials and strict.applies(change.suite):
        reasons.append(xpass_reason(change.name, change.source))
    if change.budget and change.same_recorded_usage:
        where = f" ({change.source})" if change.source else ""
        reasons.append(
            f"{change.name}{where} is over budget on the same recorded usage (both evals "
            f"replayed it): {'; '.join(change.budget)}."
        )
    return reasons


def _changed_behaviour(cases: list[CaseChange]) -> list[CaseChange]:
    """Cases both evals ran whose trajectories differ, in the comparison's order."""
    return [c for c in cases if c.baseline is not None and c.current is not None and c.divergences]


def _change_reason(changed: list[CaseChange]) -> str:
    first = changed[0]
    where = f" ({first.source})" if first.source else ""
    d = first.divergences[0]
    return (
        f"{len(changed)} case(s) changed behaviour (--fail-on-change); the first, "
        f"{first.name}{where}: {d.cls} at step {d.step} ({d.agent}), {clip(d.label)}."
    )


def _failing_reason(change: CaseChange, *, dirty_baseline: bool) -> str | None:
    """Why this case fails the gate, or None: it passed in the baseline and fails (or could
    not run) now; or it fails and nothing excuses it — no baseline has it, the baseline could
    not run it either (an error excuses nothing: it says nothing of the code), or the baseline
    that failed it too ran uncommitted code (possibly this very change, evaluated before it
    was committed)."""
    now, before = change.current, change.baseline
    if now is None or not now.trials or now.passed_trials == now.trials or change.flaky:
        return None
    fails = "could not run now" if now.status == "error" else "fails now"
    if before is None:
        why = f"{fails.removesuffix(' now')} and is not in the baseline"
    elif before.fraction == 1.0:
        why = f"passed in the baseline and {fails}"
    elif before.status == "error":
        why = f"{fails}, and the baseline could not run it either"
    elif not before.trials:
        why = f"{fails}, and the baseline did not count it ({before.status})"
    elif dirty_baseline:
        why = (
            f"{fails} and failed in the baseline too, but the baseline ran uncommitted code, "
            "so that cannot excuse it"
        )
    else:
        return None  # already failing in a clean baseline: known, reported elsewhere
    detail = f": {clip(change.reasons[0])}" if change.reasons else ""
    where = f" ({change.source})" if change.source else ""
    sentence = f"{change.name}{where} {why}{detail}"
    return sentence if sentence.endswith(("…", ".")) else sentence + "."
