"""Is a change in pass rate between two evals real? An exact paired test and a bootstrap CI.

The test is the exact two-sided **sign test on per-case pass-fraction deltas**: each case
present in both evals counts as "better" or "worse" by the sign of (current pass fraction −
baseline pass fraction), ties are dropped, and under "no change" better and worse are equally
likely, so the count of worse cases is Binomial(n, ½). With one trial per case a pass fraction
is 0 or 1, and this is exactly McNemar's exact test on the discordant pairs (b cases passed →
failed, c failed → passed). We chose it over an exact permutation test on the deltas because it
stays exact with `math.comb` for any number of cases (a permutation test needs 2^n sign flips or
an approximation) and needs no assumption about how trials within a case relate; the price is
that it ignores how *much* a case's pass fraction moved, which is what several trials add.

The confidence interval is a seeded percentile bootstrap over cases (cases are resampled with
all their trials, from the union of both evals), so it is an interval for the very delta that is
reported: the trial-weighted pass rate of the current eval minus that of the baseline.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from agentbench.evals.comparing.stats import percentile


def binomial_two_sided_p(k: int, n: int) -> float:
    """Exact two-sided p of seeing a split at least as uneven as k of n with p = ½."""
    if n <= 0:
        return 1.0
    tail = min(k, n - k)
    mass = sum(math.comb(n, i) for i in range(tail + 1))
    return min(1.0, 2 * mass / 2**n)


def mcnemar_exact_p(worse: int, better: int) -> float:
    """McNemar's exact test: `worse` cases passed → failed, `better` failed → passed."""
    return binomial_two_sided_p(worse, worse + better)


def sign_test_p(deltas: Sequence[float]) -> float:
    """Exact two-sided sign test on paired deltas (zeros are ties and are dropped)."""
    worse = sum(1 for d in deltas if d < 0)
    better = sum(1 for d in deltas if d > 0)
    return mcnemar_exact_p(worse, better)


@dataclass(frozen=True)
class CaseCounts:
    """One case's counted trials in each eval (0 trials: the case is absent or not counted)."""

    baseline_passed: int
    baseline_trials: int
    current_passed: int
    current_trials: int


def pooled_delta(cases: Sequence[CaseCounts]) -> float | None:
    """Current pass rate minus baseline pass rate, both over all counted trials."""
    base_trials = sum(c.baseline_trials for c in cases)
    cur_trials = sum(c.current_trials for c in cases)
    if not base_trials or not cur_trials:
        return None
    return (
        sum(c.current_passed for c in cases) / cur_trials
        - sum(c.baseline_passed for c in cases) / base_trials
    )


def bootstrap_delta_ci(
    cases: Sequence[CaseCounts],
    *,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `pooled_delta`, resampling cases; None without data."""
    if pooled_delta(cases) is None:
        return None
    columns = (
        [c.baseline_passed for c in cases],
        [c.baseline_trials for c in cases],
        [c.current_passed for c in cases],
        [c.current_trials for c in cases],
    )
    rng = random.Random(seed)
    indices = range(len(cases))
    deltas: list[float] = []
    for _ in range(resamples):
        drawn = rng.choices(indices, k=len(cases))
        # map() over list.__getitem__ keeps the inner loop in C: 2,000 resamples of a few
        # thousand cases stay around a second without numpy.
        bp, bt, cp, ct = (sum(map(col.__getitem__, drawn)) for col in columns)
        if bt and ct:  # a resample with no counted trials on one side has no delta
            deltas.append(cp / ct - bp / bt)
    if not deltas:
        return None
    tail = (1 - level) / 2 * 100
    low, high = percentile(deltas, tail), percentile(deltas, 100 - tail)
    assert low is not None and high is not None
    return (low, high)
