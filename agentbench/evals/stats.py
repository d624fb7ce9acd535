"""Numbers about an eval: pass rate, pass@k, pass^k, percentiles, per-scorer means.

pass@k is the chance that at least one of k trials passes (the unbiased estimator of Chen et
al., 2021, from n trials with c passes); pass^k is the chance that all k pass (tau-bench's
reliability measure, C(c, k) / C(n, k)). Cases marked expected-to-fail and skipped cases are
counted apart, so a known failure never drags the pass rate down and an unexpected pass shows.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbench.replay.verdict import divergence_verdict


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k trials passes, from n trials with c passes."""
    if n <= 0 or k <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that all of k trials pass, from n trials with c passes."""
    if n <= 0 or k <= 0:
        return 0.0
    k = min(k, n)
    return math.comb(c, k) / math.comb(n, k)


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0-100) with linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class TrialOutcome:
    """One scored trial of one case."""

    suite: str
    case_id: str
    trial: int
    status: str  # passed | failed | xfailed | xpassed | error | skipped
    score: float
    scores: list[dict[str, Any]] = field(default_factory=list)  # name, value, passed, reason
    run_id: str | None = None
    duration_ms: float = 0.0
    tokens: int = 0
    cost_usd: float | None = None
    error: str | None = None
    tags: list[str] = field(default_factory=list)
    source: str | None = None  # "file:line" of the case
    # What replaying the recording showed, whether or not it failed the trial: each drifted
    # model call ({call, agent, step, changes}) and the divergences from the recorded
    # trajectory (first first), as `DriftAt.as_dict()` and `Divergence.as_dict()`.
    drifts: list[dict[str, Any]] = field(default_factory=list)
    divergences: list[dict[str, Any]] = field(default_factory=list)
    # The root run of each turn of a multi-turn case (`run_id` is the last turn's).
    turn_runs: list[str] = field(default_factory=list)
    # Where a replayed trial stopped being evidence: set when some model call's request no
    # longer matched the recording (or went beyond it). {step, agent, class, cause} name the
    # first divergence (the root cause); `call` is the first model call (1-based) whose
    # recorded answer no longer applies; `live_from` the call a live model took over at
    # (--live-from-divergence), else None; `stopped` is true when --strict stopped the run there.
    diverged_at: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.suite, self.case_id)

    @property
    def passed(self) -> bool:
        return self.status in ("passed", "xpassed")

    @property
    def counted(self) -> bool:
        """Counts towards the pass rate (expected failures and skips do not)."""
        return self.status in ("passed", "failed", "error")

    @property
    def drift_failed(self) -> bool:
        """Its request drift failed it (rather than being only reported, --allow-drift)."""
        return any(s["name"] == "request_drift" and not s["passed"] for s in self.scores)

    @property
    def continued_live(self) -> bool:
        """The trial diverged and a live model answered from there (--live-from-divergence)."""
        return bool(self.diverged_at and self.diverged_at.get("live_from"))

    def divergence_verdict(self) -> str | None:
        """One line on where the recording stopped applying, for every output."""
        return divergence_verdict(self.diverged_at) if self.diverged_at else None

    def reasons(self) -> list[str]:
        return [f"{s['name']}: {s['reason']}" for s in self.scores if not s["passed"]]


@dataclass
class Summary:
    cases: int
    trials: int
    passed: int
    failed: int
    errors: int
    xfailed: int
    xpassed: int
    skipped: int
    pass_rate: float | None
    k: int
    pass_at_k: float | None
    pass_hat_k: float | None
    scorer_means: dict[str, float]
    tokens: int
    cost_usd: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    by_suite: dict[str, dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize(outcomes: Iterable[TrialOutcome]) -> Summary:
    items = list(outcomes)
    counted = [o for o in items if o.counted]
    by_case: dict[tuple[str, str], list[TrialOutcome]] = defaultdict(list)
    for outcome in counted:
        by_case[outcome.key].append(outcome)
    k = max((len(trials) for trials in by_case.values()), default=1)
    at_k = [pass_at_k(len(t), sum(o.passed for o in t), k) for t in by_case.values()]
    hat_k = [pass_hat_k(len(t), sum(o.passed for o in t), k) for t in by_case.values()]
    scorer_values: dict[str, list[float]] = defaultdict(list)
    for outcome in counted:
        for score in outcome.scores:
            scorer_values[score["name"]].append(float(score["value"]))
    costs = [o.cost_usd for o in items if o.cost_usd is not None]
    durations = [o.duration_ms for o in items if o.status != "skipped"]
    suites: dict[str, dict[str, Any]] = {}
    for suite in sorted({o.suite for o in items}):
        mine = [o for o in counted if o.suite == suite]
        suites[suite] = {
            "trials": len(mine),
            "passed": sum(o.passed for o in mine),
            "pass_rate": _rate(mine),
        }
    return Summary(
        cases=len({o.key for o in items}),
        trials=len(items),
        passed=sum(o.status == "passed" for o in items),
        failed=sum(o.status == "failed" for o in items),
        errors=sum(o.status == "error" for o in items),
        xfailed=sum(o.status == "xfailed" for o in items),
        xpassed=sum(o.status == "xpassed" for o in items),
        skipped=sum(o.status == "skipped" for o in items),
        pass_rate=_rate(counted),
        k=k,
        pass_at_k=sum(at_k) / len(at_k) if at_k else None,
        pass_hat_k=sum(hat_k) / len(hat_k) if hat_k else None,
        scorer_means={name: sum(v) / len(v) for name, v in sorted(scorer_values.items())},
        tokens=sum(o.tokens for o in items),
        cost_usd=sum(costs) if costs else None,
        latency_p50_ms=percentile(durations, 50),
        latency_p95_ms=percentile(durations, 95),
        by_suite=suites,
    )


def _rate(outcomes: Sequence[TrialOutcome]) -> float | None:
    return sum(o.passed for o in outcomes) / len(outcomes) if outcomes else None
