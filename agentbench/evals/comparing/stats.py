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
    # An error trial whose live model failed (no connection, 5xx after retries, a timeout):
    # an outage, never a verdict on the code, so it is an infrastructure error whatever
    # `--fail-under` says.
    live_model_failed: bool = False

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
    """The eval's numbers, in one pass over its trials: `outcomes` may be a stream (an eval's
    spooled outcomes are read back from disk), so nothing but counters is kept per trial."""
    totals = _Totals()
    for outcome in outcomes:
        totals.add(outcome)
    return totals.summary()


class _Totals:
    """Running counts of a summary. Per case only two counts (pass@k needs every case's
    trials and passes, and k is known only at the end); per trial one duration (for the
    percentiles); the rest per suite, status or scorer."""

    def __init__(self) -> None:
        self.trials = 0
        self.status: dict[str, int] = defaultdict(int)
        self.cases: dict[tuple[str, str], list[int]] = {}  # [counted trials, passed]
        self.scorer_sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        self.tokens = 0
        self.cost: float | None = None
        self.durations: list[float] = []
        self.suites: dict[str, dict[str, Any]] = {}

    def add(self, outcome: TrialOutcome) -> None:
        self.trials += 1
        self.status[outcome.status] += 1
        self.tokens += outcome.tokens
        if outcome.cost_usd is not None:
            self.cost = (self.cost or 0.0) + outcome.cost_usd
        if outcome.status != "skipped":
            self.durations.append(outcome.duration_ms)
        suite = self.suites.get(outcome.suite)
        if suite is None:
            suite = self.suites[outcome.suite] = _suite_counts()
        case = self.cases.get(outcome.key)
        if case is None:
            case = self.cases[outcome.key] = [0, 0]
            suite["cases"] += 1
        column = _SUITE_COLUMN.get(outcome.status)
        if column is not None:
            suite[column] += 1
        if not outcome.counted:
            return
        case[0] += 1
        case[1] += outcome.passed
        suite["trials"] += 1
        suite["passed"] += outcome.passed
        for score in outcome.scores:
            sums = self.scorer_sums[score["name"]]
            sums[0] += float(score["value"])
            sums[1] += 1

    def summary(self) -> Summary:
        counted = [(n, c) for n, c in self.cases.values() if n]
        k = max((n for n, _ in counted), default=1)
        at_k = [pass_at_k(n, c, k) for n, c in counted]
        hat_k = [pass_hat_k(n, c, k) for n, c in counted]
        passed_trials = sum(c for _, c in counted)
        counted_trials = sum(n for n, _ in counted)
        suites = {}
        for name in sorted(self.suites):
            numbers = self.suites[name]
            numbers["pass_rate"] = (
                numbers["passed"] / numbers["trials"] if numbers["trials"] else None
            )
            suites[name] = numbers
        status = self.status
        return Summary(
            cases=len(self.cases),
            trials=self.trials,
            passed=status["passed"],
            failed=status["failed"],
            errors=status["error"],
            xfailed=status["xfailed"],
            xpassed=status["xpassed"],
            skipped=status["skipped"],
            pass_rate=passed_trials / counted_trials if counted_trials else None,
            k=k,
            pass_at_k=sum(at_k) / len(at_k) if at_k else None,
            pass_hat_k=sum(hat_k) / len(hat_k) if hat_k else None,
            scorer_means={
                name: total / count for name, (total, count) in sorted(self.scorer_sums.items())
            },
            tokens=self.tokens,
            cost_usd=self.cost,
            latency_p50_ms=percentile(self.durations, 50),
            latency_p95_ms=percentile(self.durations, 95),
            by_suite=suites,
        )


# A suite's counts by status, as the summary table prints them: a trial that could not run
# (error) apart from one that failed, the expected failures (xfailed, xpassed) together.
_SUITE_COLUMN = {
    "failed": "failed",
    "error": "errors",
    "xpassed": "expected",
    "xfailed": "expected",
    "skipped": "skipped",
}


def _suite_counts() -> dict[str, Any]:
    return {
        "trials": 0,  # counted ones (passed, failed, error): what the pass rate is over
        "passed": 0,  # of those
        "pass_rate": None,
        "cases": 0,
        "failed": 0,
        "errors": 0,  # could not run (a missing cassette, a live model that failed)
        "expected": 0,  # xfailed or xpassed
        "skipped": 0,
    }
