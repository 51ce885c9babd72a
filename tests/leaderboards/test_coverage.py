"""Intervals that cover at the edges (#29.1): the board's 95 % CI of a bounded subject, pinned
to statsmodels' Clopper–Pearson interval for right/wrong values, and seeded simulations of
how often it covers the truth at 10–50 items and a true mean of 90–99 %."""

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from apps.leaderboards.stats import Dist, bounded_ci, mean_ci, paired

NS = (10, 20, 50)
PS = (0.90, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99)


def binary_ci(correct: int, n: int, low: float = 0.0, high: float = 1.0) -> tuple[float, float]:
    """The board's interval of `correct` of `n` right (values at the range's two ends)."""
    dist = Dist()
    dist.add(high, correct) if correct else None
    dist.add(low, n - correct) if n - correct else None
    ci = dist.ci(low, high)
    assert ci is not None and ci.method == "clopper-pearson"
    return ci.low, ci.high


def test_thirty_of_thirty_is_not_a_point() -> None:
    """30/30 on a 0–100 MCQ subject showed `100 [100, 100]`."""
    ci = Dist.of([100.0] * 30).ci(0, 100)
    assert ci is not None
    low, high = proportion_confint(30, 30, alpha=0.05, method="beta")
    assert (ci.low, ci.high) == pytest.approx((100 * low, 100 * high), abs=1e-9)
    # By hand: with every item right, the lower end solves p³⁰ = 0.025.
    assert ci.low == pytest.approx(100 * 0.025 ** (1 / 30)) and ci.high == 100


@pytest.mark.parametrize("n", NS)
def test_right_wrong_values_get_statsmodels_clopper_pearson(n: int) -> None:
    for correct in range(n + 1):
        low, high = proportion_confint(correct, n, alpha=0.05, method="beta")
        assert binary_ci(correct, n) == pytest.approx((low, high), abs=1e-12)
        # The same on a 0–100 scale and through mean_ci (raw values).
        values = [100.0] * correct + [0.0] * (n - correct)
        ci = mean_ci(values, 0, 100)
        assert ci is not None
        assert (ci.low, ci.high) == pytest.approx((100 * low, 100 * high), abs=1e-9)


def test_right_wrong_coverage_at_90_to_99_percent() -> None:
    """Seeded simulation, 4,000 boards per (n, p): the share whose interval holds the true p."""
    rng = np.random.default_rng(2911)
    worst = 1.0
    for n in NS:
        ends = np.array([binary_ci(k, n) for k in range(n + 1)])
        for p in PS:
            correct = rng.binomial(n, p, size=4000)
            covered = (ends[correct, 0] <= p) & (p <= ends[correct, 1])
            worst = min(worst, float(covered.mean()))
            assert covered.mean() >= 0.93, (n, p, covered.mean())
    assert worst >= 0.93


def rubric_draws(p_top: float) -> tuple[np.ndarray, np.ndarray]:
    """A 1–5 rubric where most answers get 5: the rest spread over 4, 3 and 1."""
    values = np.array([1.0, 3.0, 4.0, 5.0])
    rest = 1 - p_top
    return values, np.array([0.2 * rest, 0.3 * rest, 0.5 * rest, p_top])


@pytest.mark.parametrize("n", NS)
def test_bounded_scores_coverage_near_the_top(n: int) -> None:
    """Seeded simulation on non-binary bounded scores (a 1–5 rubric, true mean 4.6–4.97):
    the bounded interval covers the true mean at least 93 % of the time."""
    rng = np.random.default_rng(29 + n)
    for p_top in (0.9, 0.99):
        values, shares = rubric_draws(p_top)
        truth = float(values @ shares)
        covered = 0
        reps = 400
        for _ in range(reps):
            counts = rng.multinomial(n, shares)
            keep = counts > 0
            ci = bounded_ci(values[keep], counts[keep], 1, 5)
            covered += ci.low <= truth <= ci.high
        assert covered / reps >= 0.93, (n, p_top, covered / reps)


def test_bounded_interval_on_right_wrong_values_is_clopper_pearson() -> None:
    """The Monte Carlo form agrees with the exact one where both apply: values at 0 and 1 with
    a range a little wider than them go through the Dirichlet draws."""
    ci = bounded_ci(np.array([0.0, 1.0]), np.array([3, 17]), -1e-12, 1 + 1e-12, draws=200_000)
    low, high = proportion_confint(17, 20, alpha=0.05, method="beta")
    assert ci.method == "bounded"
    assert (ci.low, ci.high) == pytest.approx((low, high), abs=5e-3)


def test_all_equal_rubric_values_get_an_interval_inside_the_range() -> None:
    ci = Dist.of([3.0] * 30).ci(1, 5)
    assert ci is not None and ci.method == "bounded"
    # The extra observation at 1 (or 5) has weight Beta(1, 30): 97.5 % point 1 − 0.025^(1/30).
    half = 2 * (1 - 0.025 ** (1 / 30))
    # (a Monte Carlo of 4,000 draws: within 0.02 of it)
    assert (ci.low, ci.high) == pytest.approx((3 - half, 3 + half), abs=0.02)


def test_equal_paired_differences_are_not_a_point() -> None:
    """Compare page: every paired difference the same (30 items, a right and b wrong on each)."""
    result = paired([1.0] * 30, [0.0] * 30, span=1.0)
    # Differences lie in [−1, 1]; all at its end, the bound is Clopper–Pearson's on that span.
    low, _high = proportion_confint(30, 30, alpha=0.05, method="beta")
    assert result.ci is not None and result.ci.method == "clopper-pearson"
    assert (result.ci.low, result.ci.high) == pytest.approx((-1 + 2 * low, 1.0))
    same = paired([1.0] * 30, [1.0] * 30, span=1.0)
    assert same.ci is not None and same.ci.low < 0 < same.ci.high
