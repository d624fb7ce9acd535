"""How one case changed between two evals: its trials folded into one side each, then classified.

A side is the case's trials in one eval: pass fraction over the counted trials (expected
failures and skips do not count), mean score, and mean tokens, cost and latency over the trials
that ran. The kind says what a reviewer should look at first: `could_not_run` (every counted
trial errored now — a missing cassette, a live model that failed — so the case was not judged,
whatever the baseline said), `newly_failing` (every counted trial passed before, none passes
now), `xpassed` (an expected failure passed: pytest's XPASS),
`budget_regression` (tokens, cost or latency worse than the budget), `score_changed`, `flaky`
(the trials of either eval disagree), `behaviour_changed` (nothing above, but the trajectory
differs from the baseline's), `usage_changed` (between two replayed evals, tokens or cost moved
at all), `newly_passing`, `added`, `removed` or `unchanged`. Latency is judged only between two
live evals: a replayed model call takes microseconds, so a replayed run's duration is the
machine's load, not the agent's. Tokens and cost are the other way round: replayed, they come
from the recording, so between two replayed evals any change is reported (and `evals.comparing.gate`
gates it when both served the same recorded usage); between live evals only a change over the
budget is, since a live model's usage varies from call to call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.replay.diff import Divergence
from agentbench.replay.trajectory import Step

# The order cases are listed in: what breaks the build first, what did not change last.
KIND_ORDER = (
    "could_not_run",
    "newly_failing",
    "xpassed",
    "budget_regression",
    "score_changed",
    "flaky",
    "behaviour_changed",
    "usage_changed",
    "newly_passing",
    "added",
    "removed",
    "unchanged",
)
_SCORE_EPSILON = 1e-9


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class CaseSide:
    """One case's trials in one eval, folded together."""

    status: str  # passed | failed | error | flaky (trials disagree) | xfailed | xpassed | skipped
    score: float | None
    passed_trials: int
    trials: int  # counted trials only
    tokens: float | None
    cost_usd: float | None
    duration_ms: float | None
    run_id: str | None  # the first failing trial's run, else the first trial's
    reasons: list[str] = field(default_factory=list)
    source: str | None = None
    drifts: list[dict[str, Any]] = field(default_factory=list)  # the failing trial's request drift
    turn_runs: list[str] = field(default_factory=list)  # that trial's turns, when several
    xpassed_trials: int = 0  # expected failures that passed (XPASS)
    # What the recording said the representative trial's model calls used (see
    # `compare.recorded_usage`); None when it is not known.
    recorded_usage: str | None = None

    @property
    def fraction(self) -> float | None:
        return self.passed_trials / self.trials if self.trials else None

    @property
    def flaky(self) -> bool:
        return 0 < self.passed_trials < self.trials

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "score": self.score,
            "passed_trials": self.passed_trials,
            "trials": self.trials,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "duration_ms": self.duration_ms,
            "run_id": self.run_id,
            "xpassed_trials": self.xpassed_trials,
        }


def fold(trials: Sequence[TrialOutcome]) -> CaseSide:
    """One side of a case from its trial outcomes (any order)."""
    ordered = sorted(trials, key=lambda o: o.trial)
    counted = [o for o in ordered if o.counted]
    ran = [o for o in ordered if o.status != "skipped"]
    failing = [o for o in counted if not o.passed]
    passed = len(counted) - len(failing)
    if counted:
        if not failing:
            status = "passed"
        elif passed:
            status = "flaky"
        else:
            status = "error" if all(o.status == "error" for o in failing) else "failed"
    else:
        status = ordered[0].status if ordered else "skipped"
    xpassed = sum(o.status == "xpassed" for o in ordered)
    if xpassed and not counted:
        status = "xpassed"  # one unexpected pass is an XPASS, whatever the other trials did
    costs = [o.cost_usd for o in ran if o.cost_usd is not None]
    reasons: list[str] = []
    for outcome in failing:
        for reason in [outcome.error] if outcome.status == "error" else outcome.reasons():
            if reason and reason not in reasons:
                reasons.append(reason)
    representative = (failing or ordered or [None])[0]
    drifts = list(representative.drifts) if representative else []
    if representative and not drifts:  # results stored before drift had its own column
        drifts = [
            drift
            for score in representative.scores
            if score.get("name") == "request_drift"
            for drift in score.get("drifts", ())
        ]
    return CaseSide(
        status=status,
        score=_mean([o.score for o in (counted or ran)]),
        passed_trials=passed,
        trials=len(counted),
        tokens=_mean([float(o.tokens) for o in ran]),
        cost_usd=_mean(costs),
        duration_ms=_mean([o.duration_ms for o in ran]),
        run_id=representative.run_id if representative else None,
        reasons=reasons,
        source=next((o.source for o in ordered if o.source), None),
        drifts=drifts,
        turn_runs=list(representative.turn_runs) if representative else [],
        xpassed_trials=xpassed,
    )


@dataclass
class CaseChange:
    """One case in a comparison."""

    suite: str
    case_id: str
    kind: str
    baseline: CaseSide | None
    current: CaseSide | None
    score_delta: float | None = None
    reasons: list[str] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    baseline_steps: list[Step] = field(default_factory=list)
    current_steps: list[Step] = field(default_factory=list)
    budget: list[str] = field(default_factory=list)  # over the budget, whatever the kind
    usage: list[str] = field(default_factory=list)  # tokens or cost moved (replayed evals)
    # Both sides served the same recorded usage: a usage change is then the code's.
    same_recorded_usage: bool | None = None

    @property
    def name(self) -> str:
        return f"{self.suite}/{self.case_id}"

    @property
    def source(self) -> str | None:
        side = self.current or self.baseline
        return side.source if side else None

    @property
    def flaky(self) -> bool:
        return any(side is not None and side.flaky for side in (self.baseline, self.current))

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "case_id": self.case_id,
            "source": self.source,
            "kind": self.kind,
            "baseline": self.baseline.as_dict() if self.baseline else None,
            "current": self.current.as_dict() if self.current else None,
            "score_delta": self.score_delta,
            "reasons": list(self.reasons),
            "budget": list(self.budget),
            "usage": list(self.usage),
            "same_recorded_usage": self.same_recorded_usage,
            "divergences": [d.as_dict() for d in self.divergences],
            "steps": {
                "baseline": [s.as_dict() for s in self.baseline_steps],
                "current": [s.as_dict() for s in self.current_steps],
            },
        }


def budget_regressions(
    before: CaseSide,
    after: CaseSide,
    *,
    budget_pct: float,
    latency_floor_ms: float,
    judge_latency: bool = True,
) -> list[str]:
    """Sentences for each of tokens, cost and latency (when `judge_latency`) that grew by more
    than `budget_pct`."""
    found = []
    for label, old, new, floor, unit in (
        ("tokens", before.tokens, after.tokens, 0.0, ""),
        ("cost", before.cost_usd, after.cost_usd, 0.0, "$"),
        ("latency", before.duration_ms, after.duration_ms, latency_floor_ms, " ms"),
    ):
        if label == "latency" and not judge_latency:
            continue
        if old is None or new is None or new - old <= floor:
            continue
        if old <= 0:
            found.append(f"{label} {_amounts(old, new, unit)} (was zero)")
        elif new > old * (1 + budget_pct / 100):
            found.append(
                f"{label} {_amounts(old, new, unit)} "
                f"(+{(new / old - 1) * 100:.0f}%, budget +{budget_pct:g}%)"
            )
    return found


def usage_changes(before: CaseSide, after: CaseSide) -> list[str]:
    """Sentences for tokens and cost that moved at all (more or less)."""
    found = []
    for label, old, new, unit in (
        ("tokens", before.tokens, after.tokens, ""),
        ("cost", before.cost_usd, after.cost_usd, "$"),
    ):
        if old is None or new is None or math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-12):
            continue
        change = f" ({(new / old - 1) * 100:+.0f}%)" if old > 0 else ""
        found.append(f"{label} {_amounts(old, new, unit)}{change}")
    return found


def _amounts(old: float, new: float, unit: str) -> str:
    """`old → new`, with as many decimals as it takes for two different costs to read
    differently ($0.00031 → $0.00033, not $0.0003 → $0.0003), up to ten."""
    if unit != "$":
        return f"{old:,.0f}{unit} → {new:,.0f}{unit}"
    digits = 4
    while digits < 10 and old != new and f"{old:.{digits}f}" == f"{new:.{digits}f}":
        digits += 1
    return f"${old:.{digits}f} → ${new:.{digits}f}"


def classify(
    suite: str,
    case_id: str,
    before: CaseSide | None,
    after: CaseSide | None,
    *,
    budget_pct: float,
    latency_floor_ms: float,
    judge_latency: bool = True,
    judge_usage: bool = False,
) -> CaseChange:
    """The kind of change of one case (divergences and steps are filled in later, and with
    them `behaviour_changed`: see `mark_behaviour_changed`). `judge_usage`: both evals
    replayed, so any change of tokens or cost is reported."""
    if before is None or after is None:
        kind = "added" if before is None else "removed"
        reasons = list(after.reasons) if after is not None else []
        return CaseChange(suite, case_id, kind, before, after, reasons=reasons)
    delta = (
        after.score - before.score if after.score is not None and before.score is not None else None
    )
    change = CaseChange(suite, case_id, "unchanged", before, after, delta, list(after.reasons))
    old, new = before.fraction, after.fraction
    budget = budget_regressions(
        before,
        after,
        budget_pct=budget_pct,
        latency_floor_ms=latency_floor_ms,
        judge_latency=judge_latency,
    )
    change.budget = budget
    change.usage = usage_changes(before, after) if judge_usage else []
    if after.status == "error":
        change.kind = "could_not_run"
    elif old == 1.0 and new == 0.0:
        change.kind = "newly_failing"
    elif old == 0.0 and new == 1.0:
        change.kind = "newly_passing"
    elif after.xpassed_trials:
        change.kind = "xpassed"
        change.reasons.insert(0, _xpass_sentence(after))
    elif change.flaky:
        change.kind = "flaky"
    elif budget:
        change.kind = "budget_regression"
    elif delta is not None and abs(delta) > _SCORE_EPSILON:
        change.kind = "score_changed"
    elif change.usage:
        change.kind = "usage_changed"
    change.reasons.extend(budget or change.usage)
    return change


def _xpass_sentence(side: CaseSide) -> str:
    trials = f" in {side.xpassed_trials} trials" if side.xpassed_trials > 1 else ""
    return f"XPASS: marked xfail, and passed{trials}"


def mark_behaviour_changed(change: CaseChange) -> None:
    """An `unchanged` case whose trajectory differs from the baseline's (or whose requests
    drifted from its recording) is `behaviour_changed`: equal scores do not mean equal
    behaviour, and a framework upgrade must be able to see the difference."""
    if change.kind in ("unchanged", "usage_changed") and change.divergences:
        change.kind = "behaviour_changed"


def sort_key(change: CaseChange) -> tuple[int, str, str]:
    return (KIND_ORDER.index(change.kind), change.suite, change.case_id)
