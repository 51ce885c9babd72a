"""The judge-corrected estimator (apps.leaderboards.ppi) against ppi-python, the reference
implementation of PPI++ (pinned in requirements-test.txt), and in a seeded simulation of a
biased judge (#31.1's done-when)."""

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate, ppi_mean_pval
from ppi_py.baselines import classical_mean_ci

from apps.leaderboards.ppi import classical_mean, ppi_mean, tuned_lambda


def generated(kind: str, n: int, big_n: int, seed: int) -> tuple[np.ndarray, ...]:
    """People's values on n labelled items, the judge's on those and on big_n more."""
    rng = np.random.default_rng(seed)
    if kind == "rubric":  # 1–5, a judge that overrates by one point half the time
        truth = rng.integers(1, 6, n + big_n).astype(float)
        judge = np.clip(truth + (rng.random(n + big_n) < 0.5), 1, 5)
    elif kind == "binary":  # right/wrong 0/100, a judge wrong 20 % of the time
        truth = 100.0 * (rng.random(n + big_n) < 0.6)
        judge = np.where(rng.random(n + big_n) < 0.2, 100 - truth, truth)
    elif kind == "continuous":  # a noisy, shrunk judge
        truth = rng.normal(3, 1, n + big_n)
        judge = 0.6 * truth + rng.normal(0.8, 0.7, n + big_n)
    else:  # a judge that knows nothing: λ near 0, the people's mean alone
        truth = rng.normal(0, 1, n + big_n)
        judge = rng.normal(0, 1, n + big_n)
    return truth[:n], judge[:n], judge[n:]


CASES = [
    (kind, n, big_n, seed)
    for seed, (kind, n, big_n) in enumerate(
        [
            ("rubric", 30, 270),
            ("rubric", 100, 900),
            ("binary", 12, 108),
            ("binary", 200, 1800),
            ("continuous", 50, 5000),
            ("continuous", 400, 400),
            ("useless", 60, 600),
            ("useless", 5, 20),
        ]
    )
]


@pytest.mark.parametrize(("kind", "n", "big_n", "seed"), CASES)
def test_matches_ppi_python(kind, n, big_n, seed):
    y, yhat, yhat_unlabelled = generated(kind, n, big_n, seed)
    found = ppi_mean(y, yhat, yhat_unlabelled)
    assert found is not None
    low, high = ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=0.05)
    point = ppi_mean_pointestimate(y, yhat, yhat_unlabelled)
    assert found.low == pytest.approx(float(low[0]), abs=1e-6)
    assert found.high == pytest.approx(float(high[0]), abs=1e-6)
    assert found.mean == pytest.approx(float(np.ravel(point)[0]), abs=1e-6)
    # The p-value of "mean 0" at the λ the interval used (ppi_mean_pval does not clip λ).
    p = ppi_mean_pval(y, yhat, yhat_unlabelled, lam=found.lam)
    assert found.p == pytest.approx(float(np.ravel(p)[0]), abs=1e-6)
    # λ fixed by hand: plain PPI (1) and the people alone (0) agree too.
    for lam in (0.0, 1.0):
        fixed = ppi_mean(y, yhat, yhat_unlabelled, lam=lam)
        low, high = ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=0.05, lam=lam)
        assert (fixed.low, fixed.high) == pytest.approx((low[0], high[0]), abs=1e-6)
    _, low, high = classical_mean(y)
    assert (low, high) == pytest.approx(classical_mean_ci(y, alpha=0.05), abs=1e-6)


def test_paired_difference_is_ppi_on_the_differences():
    """Two models' corrected difference is PPI++ on per-item differences, as ppi-python
    computes it on the same arrays (labelled: both reviewed in the sample)."""
    y_a, yhat_a, rest_a = generated("rubric", 80, 720, 11)
    y_b, yhat_b, rest_b = generated("rubric", 80, 720, 12)
    found = ppi_mean(y_a - y_b, yhat_a - yhat_b, rest_a - rest_b)
    low, high = ppi_mean_ci(y_a - y_b, yhat_a - yhat_b, rest_a - rest_b, alpha=0.05)
    assert (found.low, found.high) == pytest.approx((low[0], high[0]), abs=1e-6)


def test_lambda_and_effective_labels():
    """A judge that tracks people well earns λ near 1 and an effective number of labels well
    above the n people gave; a useless judge earns λ near 0 and about n."""
    y, yhat, rest = generated("continuous", 100, 5000, 3)
    good = ppi_mean(y, yhat, rest)
    assert 0.3 < good.lam <= 1 and good.effective_n > 120
    y, yhat, rest = generated("useless", 100, 5000, 4)
    useless = ppi_mean(y, yhat, rest)
    assert useless.lam < 0.1 and 90 < useless.effective_n < 110
    # Hand-computed on a tiny case: Cov(y, ŷ) = 0.5 (denominator n), Var(ŷ over all four
    # items) = 1/3 (denominator 3) ⇒ λ = 0.5 / ((1 + 2/2) · 1/3) = 0.75.
    assert tuned_lambda(np.array([0.0, 2.0]), np.array([0.0, 1.0]), np.array([0.0, 1.0])) == (
        pytest.approx(0.75)
    )


def test_too_few_labels_and_everything_labelled():
    assert ppi_mean(np.array([1.0]), np.array([1.0]), np.array([2.0, 3.0])) is None
    y = np.array([1.0, 2.0, 3.0, 4.0])
    found = ppi_mean(y, y + 1, np.array([]))
    assert found.mean == pytest.approx(2.5) and found.lam == 0
    assert (found.low, found.high) == pytest.approx(classical_mean_ci(y, alpha=0.05))


def test_biased_judge_simulation():
    """Seeded: 1,000 datasets of 1,000 items whose people's values are 1–5 (true mean 3.05)
    and a judge that overrates (by a point on 30 % of items, noise on 10 %), people reviewing
    a random 10 %. The judge-only 95 % interval almost never covers the truth; the corrected
    one does about 95 % of the time, and its mean is unbiased."""
    rng = np.random.default_rng(20261128)
    shares = np.array([0.15, 0.2, 0.25, 0.25, 0.15])
    truth = float(np.arange(1, 6) @ shares)
    size, labelled, repeats = 1000, 100, 1000
    judge_covers = corrected_covers = 0
    means = []
    for _ in range(repeats):
        y = rng.choice(np.arange(1.0, 6.0), size=size, p=shares)
        raised = (rng.random(size) < 0.6) * rng.integers(0, 2, size)
        noise = (rng.random(size) < 0.1) * rng.integers(-1, 2, size)
        yhat = np.clip(y + raised + noise, 1, 5)
        sample = np.zeros(size, dtype=bool)
        sample[rng.choice(size, labelled, replace=False)] = True
        judge_low, judge_high = classical_mean(yhat)[1:]
        judge_covers += judge_low <= truth <= judge_high
        found = ppi_mean(y[sample], yhat[sample], yhat[~sample])
        corrected_covers += found.low <= truth <= found.high
        means.append(found.mean)
    assert judge_covers / repeats < 0.5
    assert corrected_covers / repeats >= 0.93
    assert abs(np.mean(means) - truth) < 0.01
