"""The paired exact test and the bootstrap interval, against hand-computed numbers."""

from __future__ import annotations

import pytest

from agentbench.evals.comparing.significance import (
    CaseCounts,
    binomial_two_sided_p,
    bootstrap_delta_ci,
    mcnemar_exact_p,
    pooled_delta,
    sign_test_p,
)


@pytest.mark.parametrize(
    ("worse", "better", "expected"),
    [
        (0, 0, 1.0),  # no discordant pair: no evidence at all
        (1, 0, 1.0),  # 2 * 1/2, capped
        (5, 0, 2 / 32),  # 0.0625: five regressions alone are not significant
        (6, 0, 2 / 64),  # 0.03125: six are
        (8, 2, 2 * (1 + 10 + 45) / 1024),  # 0.109375
        (2, 8, 2 * (1 + 10 + 45) / 1024),  # two-sided: symmetric
        (3, 3, 1.0),
        (10, 1, 2 * (1 + 11) / 2048),  # 0.01171875
    ],
)
def test_mcnemar_exact_matches_hand_computed_values(worse: int, better: int, expected: float):
    assert mcnemar_exact_p(worse, better) == pytest.approx(expected)


def test_sign_test_drops_ties_and_counts_signs():
    # per-case pass-fraction deltas over 3 trials: 4 worse, 1 better, 3 ties -> n = 5, k = 1
    deltas = [-1 / 3, -2 / 3, -1.0, -1 / 3, 1 / 3, 0.0, 0.0, 0.0]
    assert sign_test_p(deltas) == pytest.approx(2 * (1 + 5) / 32)  # 0.375
    assert sign_test_p([0.0, 0.0]) == 1.0
    assert binomial_two_sided_p(0, 20) == pytest.approx(2 / 2**20)


def test_pooled_delta_is_trial_weighted():
    cases = [CaseCounts(3, 3, 1, 3), CaseCounts(1, 1, 1, 1), CaseCounts(0, 0, 2, 2)]
    # baseline 4/4 = 1.0; current 4/6
    assert pooled_delta(cases) == pytest.approx(4 / 6 - 1.0)
    assert pooled_delta([CaseCounts(0, 0, 1, 1)]) is None


def test_bootstrap_interval_brackets_the_delta_and_is_seeded():
    cases = [CaseCounts(1, 1, 0, 1)] * 6 + [CaseCounts(1, 1, 1, 1)] * 30 + [CaseCounts(0, 1, 1, 1)]
    delta = pooled_delta(cases)
    assert delta == pytest.approx((31 - 36) / 37)
    low, high = bootstrap_delta_ci(cases, resamples=2000, seed=0)
    assert low < delta < high
    assert low < -0.2 and high < 0.05  # mostly regressions: the interval leans negative
    assert bootstrap_delta_ci(cases, seed=0) == (low, high)
    assert bootstrap_delta_ci(cases, seed=1) != (low, high)


def test_bootstrap_without_change_is_a_point_and_without_data_is_none():
    assert bootstrap_delta_ci([CaseCounts(2, 2, 2, 2)] * 5) == (0.0, 0.0)
    assert bootstrap_delta_ci([]) is None
    assert bootstrap_delta_ci([CaseCounts(0, 0, 1, 1)]) is None
