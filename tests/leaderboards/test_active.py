"""Active sampling (#31.2): the inverse-probability-weighted corrected mean, its probabilities
and the reviews a target width needs, on arrays (apps/leaderboards/active.py)."""

import itertools
import math

import numpy as np
import pytest

from apps.leaderboards.active import active_mean, active_terms, reviews_for_width, tuned_lambda
from apps.leaderboards.ppi import ppi_mean
from apps.review.sample import UNIFORM_SHARE, inclusion_probabilities


def test_estimate_pinned_to_hand_computed_values() -> None:
    # Terms with λ = 1: 0.2 + (0 − 0.2)/0.5 = −0.2; 0.8; 0.5 + (1 − 0.5)/0.5 = 1.5; 0.9.
    # Mean 3.0 / 4 = 0.75; deviations −0.95, 0.05, 0.75, 0.15 → variance 1.49 / 4 = 0.3725;
    # standard error √0.3725 / √4 = 0.3051639.
    y = np.array([0.0, np.nan, 1.0, np.nan])
    yhat = np.array([0.2, 0.8, 0.5, 0.9])
    labelled = np.array([True, False, True, False])
    pi = np.array([0.5, 0.25, 0.5, 0.25])
    found = active_mean(y, yhat, labelled, pi, lam=1.0)
    assert found is not None
    assert found.mean == pytest.approx(0.75, abs=1e-12)
    assert found.se == pytest.approx(math.sqrt(0.3725) / 2, abs=1e-12)
    assert found.low == pytest.approx(0.75 - 1.959963984540054 * found.se, abs=1e-9)
    assert (found.n, found.unlabelled) == (2, 2)
    assert found.judge_mean == pytest.approx(0.6)
    assert active_mean(y, yhat, np.array([True, False, False, False]), pi) is None


def test_unbiased_over_every_possible_draw() -> None:
    """The exact expectation over all 2^6 draws, each with its probability, is the people's
    mean, for any λ and probabilities however unequal; the judge's mean is far from it."""
    y = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    yhat = np.array([0.9, 0.8, 0.7, 0.9, 0.6, 0.2])  # biased: says 0.683, people 0.5
    pi = np.array([0.9, 0.2, 0.5, 0.35, 0.6, 0.15])
    for lam in (0.0, 0.4, 1.0):
        expected = 0.0
        for drawn in itertools.product([False, True], repeat=len(y)):
            mask = np.array(drawn)
            chance = float(np.prod(np.where(mask, pi, 1 - pi)))
            expected += chance * float(active_terms(y, yhat, mask, pi, lam).mean())
        assert expected == pytest.approx(y.mean(), abs=1e-12)
    assert yhat.mean() == pytest.approx(0.6833, abs=1e-4)


def test_tuned_lambda_minimises_the_variance() -> None:
    rng = np.random.default_rng(3)
    p = rng.random(400)
    y = (rng.random(400) < p).astype(float)
    yhat = np.clip(p + rng.normal(0, 0.3, 400), 0, 1)  # noisy: worth less than a person
    pi = inclusion_probabilities(np.sqrt(p * (1 - p)), 0.2)
    labelled = rng.random(400) < pi
    weight = np.where(labelled, 1 / pi, 0.0)
    lam = tuned_lambda(y, yhat, weight)
    grid = np.linspace(0, 1, 1001)
    variances = [active_terms(y, yhat, labelled, pi, g).var() for g in grid]
    assert 0 < lam < 1
    assert lam == pytest.approx(grid[int(np.argmin(variances))], abs=1e-3)


def test_probabilities_keep_the_budget_follow_uncertainty_and_stay_at_most_one() -> None:
    uncertainty = np.array([0.0, 1.0, 2.0, 3.0, 50.0, 0.0, 1.0, 2.0])
    pi = inclusion_probabilities(uncertainty, 0.25)
    assert pi.mean() == pytest.approx(0.25)
    assert pi.max() == 1.0  # the 50 is drawn surely, the rest scaled up to keep the budget
    rest = uncertainty < 50
    assert np.all(pi[rest] > 0)  # the uniform share: none left out
    # Below the cap, each probability is one constant × ((1 − share)·u/mean(u) + share).
    shares = (1 - UNIFORM_SHARE) * uncertainty / uncertainty.mean() + UNIFORM_SHARE
    ratios = pi[rest] / shares[rest]
    assert np.allclose(ratios, ratios[0])
    assert np.allclose(inclusion_probabilities(np.zeros(5), 0.4), 0.4)
    assert np.allclose(inclusion_probabilities(np.ones(5), 1.0), 1.0)


# ---- simulation: a biased judge that knows where it is unsure ----------------------------
N = 1000


def world(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """People's pass/fail values, the judge's biased probability of a pass, and its
    uncertainty (the spread a judge's repeated rounds would show)."""
    p = rng.beta(0.3, 0.3, N)
    y = (rng.random(N) < p).astype(float)
    yhat = np.clip(0.8 * p + 0.15, 0, 1)
    return y, yhat, np.sqrt(p * (1 - p))


def widths_and_coverage(
    rng: np.random.Generator, budget: float, active: bool, reps: int
) -> tuple[float, float, float]:
    """Mean interval width, coverage of the people's mean over the items, mean reviews."""
    widths, covered, reviews = [], 0, []
    for _ in range(reps):
        y, yhat, uncertainty = world(rng)
        if active:
            pi = inclusion_probabilities(uncertainty, budget)
            labelled = rng.random(N) < pi
            found = active_mean(np.where(labelled, y, np.nan), yhat, labelled, pi)
        else:  # the board's uniform random sample of exactly budget × N items, PPI++
            labelled = np.zeros(N, dtype=bool)
            labelled[rng.choice(N, round(budget * N), replace=False)] = True
            found = ppi_mean(y[labelled], yhat[labelled], yhat[~labelled])
        assert found is not None
        widths.append(found.high - found.low)
        covered += int(found.low <= y.mean() <= found.high)
        reviews.append(labelled.sum())
    return float(np.mean(widths)), covered / reps, float(np.mean(reviews))


def test_active_sampling_reaches_a_width_with_fewer_reviews_and_stays_covered() -> None:
    rng = np.random.default_rng(31)
    target = 0.105
    budgets = [0.10, 0.125, 0.15, 0.175, 0.20, 0.225, 0.25]
    reached: dict[bool, float] = {}
    for active in (False, True):
        for budget in budgets:
            width, coverage, reviews = widths_and_coverage(rng, budget, active, reps=120)
            assert coverage >= 0.93, (active, budget, coverage)
            if width <= target:
                reached[active] = reviews
                break
    # Measured: uniform PPI++ reaches a mean width of 0.105 at 175 reviews of 1,000, active
    # sampling at ~150 (the next budget down).
    assert reached[True] < reached[False], reached


def test_reviews_for_width_predicts_what_the_simulation_finds() -> None:
    rng = np.random.default_rng(5)
    y, yhat, uncertainty = world(rng)
    pi = inclusion_probabilities(uncertainty, 0.1)
    labelled = rng.random(N) < pi
    seen = np.where(labelled, y, np.nan)
    found = active_mean(seen, yhat, labelled, pi)
    assert found is not None
    width = found.high - found.low
    # Asked for the width it has, it answers about the reviews it has.
    same = reviews_for_width(seen, yhat, labelled, pi, found.lam, pi, width)
    assert same is not None and abs(same - labelled.sum()) <= 0.25 * labelled.sum()
    needed_active = reviews_for_width(seen, yhat, labelled, pi, found.lam, pi, 0.1)
    needed_uniform = reviews_for_width(seen, yhat, labelled, pi, found.lam, np.ones(N), 0.1)
    assert needed_active is not None and needed_uniform is not None
    assert labelled.sum() < needed_active < needed_uniform <= N
    # Drawing that many with the same probabilities does reach about that width.
    rerun = []
    for _ in range(60):
        y2, yhat2, unc2 = world(rng)
        pi2 = inclusion_probabilities(unc2, needed_active / N)
        drawn = rng.random(N) < pi2
        est = active_mean(np.where(drawn, y2, np.nan), yhat2, drawn, pi2)
        assert est is not None
        rerun.append(est.high - est.low)
    assert float(np.mean(rerun)) == pytest.approx(0.1, abs=0.012)
    # A width narrower than reviewing every item gives: unreachable.
    assert reviews_for_width(seen, yhat, labelled, pi, found.lam, pi, 0.01) is None
