"""Means, CIs, paired tests and κ against values worked out by hand or with scipy."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from apps.leaderboards import stats
from apps.leaderboards.stats import Dist


def test_dist_mean_variance_and_round_trip():
    dist = Dist.of([5, 4, 3, 5, 2])
    assert dist.n == 5
    assert dist.mean == pytest.approx(3.8)
    assert dist.variance == pytest.approx(np.var([5, 4, 3, 5, 2], ddof=1))
    again = Dist.from_json(dist.to_json())
    assert (again.n, again.mean, again.hist) == (
        5,
        pytest.approx(3.8),
        {2.0: 1, 3.0: 1, 4.0: 1, 5.0: 2},
    )


def test_dist_remove_and_merge():
    dist = Dist.of([5, 4, 3, 5, 2])
    dist.remove(5)
    dist.add(1)
    assert dist.mean == pytest.approx((4 + 3 + 5 + 2 + 1) / 5)
    other = Dist.of([1, 1])
    dist.merge(other)
    assert dist.n == 7
    assert dist.mean == pytest.approx((4 + 3 + 5 + 2 + 1 + 1 + 1) / 7)
    with pytest.raises(ValueError):
        dist.remove(4.5)


def test_dist_drops_histogram_past_the_limit_but_keeps_moments():
    values = [i / 7 for i in range(stats.HIST_LIMIT + 5)]
    dist = Dist.of(values)
    assert dist.hist is None
    assert dist.mean == pytest.approx(np.mean(values))
    dist.remove(values[0])
    assert dist.mean == pytest.approx(np.mean(values[1:]))


def test_bootstrap_ci_is_fixed_and_agrees_with_scipy_bootstrap():
    rng = np.random.default_rng(7)
    sample = rng.integers(1, 6, size=40).astype(float)
    ci = stats.mean_ci(sample)
    assert ci is not None and ci.method == "bootstrap"
    assert stats.mean_ci(sample) == ci  # fixed seed: the same interval every time
    assert ci.low < sample.mean() < ci.high
    reference = scipy_stats.bootstrap(
        (sample,), np.mean, n_resamples=20000, method="percentile", rng=np.random.default_rng(1)
    ).confidence_interval
    # Different random draws, same bootstrap distribution: the ends agree closely.
    assert ci.low == pytest.approx(reference.low, abs=0.1)
    assert ci.high == pytest.approx(reference.high, abs=0.1)


def test_histogram_bootstrap_equals_resampling_items():
    """Drawing counts per distinct value is the item bootstrap: compare with index resampling."""
    sample = np.array([5, 4, 3, 5, 2, 1, 5, 4, 4, 3], dtype=float)
    rng = np.random.default_rng(3)
    means = sample[rng.integers(0, sample.size, size=(40000, sample.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    ci = stats.mean_ci(sample)
    assert ci.low == pytest.approx(low, abs=0.11)
    assert ci.high == pytest.approx(high, abs=0.11)


def test_dist_ci_equals_ci_of_raw_values():
    sample = [5, 4, 3, 5, 2, 2, 1]
    assert Dist.of(sample).ci() == stats.mean_ci(sample)


def test_constant_sample_has_a_point_interval():
    ci = stats.mean_ci([4, 4, 4])
    assert (ci.low, ci.high, ci.method) == (4.0, 4.0, "exact")
    assert stats.mean_ci([]) is None


def test_many_distinct_values_use_the_normal_approximation():
    rng = np.random.default_rng(11)
    sample = rng.random(1000)
    ci = stats.mean_ci(sample)
    half = 1.959963984540054 * sample.std(ddof=1) / math.sqrt(sample.size)
    assert ci.method == "normal"
    assert ci.low == pytest.approx(sample.mean() - half)
    assert ci.high == pytest.approx(sample.mean() + half)
    assert Dist.of(sample).ci().low == pytest.approx(ci.low)


# ---- paired -----------------------------------------------------------------------------
def _exact_wilcoxon_p(diff: list[float]) -> float:
    """Two-sided exact signed-rank p by enumerating every sign pattern (no ties in |diff|)."""
    ranks = scipy_stats.rankdata(np.abs(diff))
    observed = sum(r for r, d in zip(ranks, diff, strict=True) if d > 0)
    n = len(diff)
    expected = n * (n + 1) / 4
    extreme = 0
    for signs in itertools.product((0, 1), repeat=n):
        w = sum(r for r, s in zip(ranks, signs, strict=True) if s)
        if abs(w - expected) >= abs(observed - expected) - 1e-9:
            extreme += 1
    return extreme / 2**n


def test_paired_counts_mean_difference_and_p_values_by_hand():
    a = [5, 4, 3, 5, 2, 4, 3, 5]
    b = [3.5, 4, 1.8, 4.7, 2.6, 0.9, 3, 2.6]
    result = stats.paired(a, b)
    diff = [x - y for x, y in zip(a, b, strict=True)]
    assert (result.n, result.wins, result.losses, result.ties) == (8, 5, 1, 2)
    assert result.mean_diff == pytest.approx(sum(diff) / 8)
    assert result.ci == stats.mean_ci(diff)
    nonzero = [d for d in diff if d != 0]
    assert result.wilcoxon_p == pytest.approx(_exact_wilcoxon_p(nonzero))
    # Sign test: 5 wins of 6 non-ties, two-sided: 2 * P(X >= 5), X ~ Bin(6, 1/2).
    assert result.sign_p == pytest.approx(2 * (math.comb(6, 5) + math.comb(6, 6)) / 2**6)


def test_paired_without_differences():
    result = stats.paired([3, 4], [3, 4])
    assert (result.ties, result.wilcoxon_p, result.sign_p, result.mean_diff) == (2, 1.0, 1.0, 0.0)
    assert stats.paired([], []).n == 0


# ---- agreement --------------------------------------------------------------------------
def test_quadratic_weighted_kappa_by_hand():
    judge = [1, 1, 2, 2, 3, 3]
    human = [1, 2, 2, 2, 3, 1]
    categories = stats.categories_for(judge + human, 1, 3)
    assert categories == [1.0, 2.0, 3.0]
    matrix = stats.confusion(judge, human, categories)
    assert matrix.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 1]]
    # Observed weighted disagreement 0.25 + 1 = 1.25; expected 0.5833 + 0.25 + 0.9167 = 1.75.
    assert stats.weighted_kappa(matrix, categories) == pytest.approx(1 - 1.25 / 1.75)


def test_two_categories_give_plain_kappa():
    judge, human = [0, 0, 100, 100], [0, 100, 100, 100]
    categories = stats.categories_for(judge + human, 0, 100)
    assert categories == [0.0, 100.0]  # too wide a range: the observed values are the categories
    matrix = stats.confusion(judge, human, categories)
    # p_o = 3/4, p_e = (2*1 + 2*3) / 16 = 1/2, κ = (3/4 - 1/2) / (1/2).
    assert stats.weighted_kappa(matrix, categories) == pytest.approx(0.5)


def test_kappa_undefined_and_perfect():
    categories = [1.0, 2.0, 3.0]
    assert stats.weighted_kappa(stats.confusion([2, 2], [2, 2], categories), categories) is None
    perfect = stats.confusion([1, 2, 3], [1, 2, 3], categories)
    assert stats.weighted_kappa(perfect, categories) == pytest.approx(1.0)
    assert stats.categories_for([i / 10 for i in range(50)], None, None) is None
