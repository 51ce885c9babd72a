"""Bradley–Terry ratings (#13.4, #29.3), pinned: the posterior mode under the declared prior
against a reference written here (a direct scipy minimisation of the same penalised
likelihood, battle by battle) to 1e-6, and without the prior against the maximum-likelihood
fit; the Laplace intervals against a finite-difference Hessian; hand cases; ratings that stay
finite (and intervals that stay wide) when a model is undefeated or winless; ranks by CI
overlap."""

import math
import random

import numpy as np
import pytest
from scipy import optimize

from apps.leaderboards.bradley_terry import (
    PRIOR_PRECISION,
    SCALE,
    Battles,
    covariance,
    fit,
    length_controlled,
    mle_exists,
    ratings,
)


def reference_fit(rows: list[tuple[str, str, float]], models: list[str]) -> np.ndarray:
    """β (mean 0) maximising Σ y log σ(β_a − β_b) + (1 − y) log σ(β_b − β_a), battle by battle."""
    index = {m: i for i, m in enumerate(models)}

    def nll(free: np.ndarray) -> float:
        beta = np.concatenate([[0.0], free])
        total = 0.0
        for a, b, y in rows:
            d = beta[index[a]] - beta[index[b]]
            total -= y * -math.log1p(math.exp(-d)) + (1 - y) * -math.log1p(math.exp(d))
        return total

    found = optimize.minimize(
        nll, np.zeros(len(models) - 1), method="BFGS", options={"gtol": 1e-10}
    )
    beta = np.concatenate([[0.0], found.x])
    return beta - beta.mean()


def arena(seed: int, strengths: dict[str, float], n: int) -> list[tuple[str, str, float]]:
    rng = random.Random(seed)
    names = list(strengths)
    rows = []
    for _ in range(n):
        a, b = rng.sample(names, 2)
        p = 1 / (1 + math.exp(strengths[b] - strengths[a]))
        draw = rng.random()
        rows.append((a, b, 0.5 if abs(draw - p) < 0.05 else float(draw < p)))
    return rows


def reference_posterior(
    rows: list[tuple[str, str, float]], models: list[str], precision: float = PRIOR_PRECISION
) -> tuple[np.ndarray, object]:
    """β at the posterior mode: −Σ log-likelihood + Σ β² · precision / 2, battle by battle."""
    index = {m: i for i, m in enumerate(models)}

    def nll(beta: np.ndarray) -> float:
        total = precision / 2 * float(beta @ beta)
        for a, b, y in rows:
            d = beta[index[a]] - beta[index[b]]
            total -= y * -math.log1p(math.exp(-d)) + (1 - y) * -math.log1p(math.exp(d))
        return total

    found = optimize.minimize(nll, np.zeros(len(models)), method="BFGS", options={"gtol": 1e-10})
    return found.x, nll


def test_the_fit_matches_a_reference_posterior_mode() -> None:
    rows = arena(1, {"alpha": 1.0, "beta": 0.4, "gamma": 0.0, "delta": -0.7}, 400)
    found = Battles.of(rows)
    reference, _ = reference_posterior(rows, found.models)
    # The prior centres the exact mode on a mean of 0; BFGS stops within 1e-4 of that.
    assert abs(reference.mean()) < 1e-4
    assert np.allclose(fit(found), reference - reference.mean(), atol=1e-6)


def test_without_the_prior_it_is_the_maximum_likelihood_fit() -> None:
    rows = arena(1, {"alpha": 1.0, "beta": 0.4, "gamma": 0.0, "delta": -0.7}, 400)
    found = Battles.of(rows)
    assert mle_exists(found)
    assert np.allclose(fit(found, prior_precision=0), reference_fit(rows, found.models), atol=1e-6)


def test_laplace_intervals_match_a_finite_difference_hessian() -> None:
    rows = arena(2, {"a": 0.5, "b": 0.0, "c": -0.5}, 60)
    found = Battles.of(rows)
    beta, nll = reference_posterior(rows, found.models)
    n, h = len(beta), 1e-4
    hessian = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            shift_i, shift_j = np.eye(n)[i] * h, np.eye(n)[j] * h
            hessian[i, j] = (
                nll(beta + shift_i + shift_j)
                - nll(beta + shift_i - shift_j)
                - nll(beta - shift_i + shift_j)
                + nll(beta - shift_i - shift_j)
            ) / (4 * h * h)
    centre = np.eye(n) - 1 / n
    expected = centre @ np.linalg.inv(hessian) @ centre
    assert np.allclose(covariance(found, fit(found)), expected, atol=1e-5)
    board = ratings(rows)
    by = {r.model: r for r in board.ratings}
    for i, model in enumerate(found.models):
        half = 1.959963984540054 * SCALE * math.sqrt(expected[i, i])
        assert (by[model].high - by[model].low) / 2 == pytest.approx(half, rel=1e-4)


def test_two_models_by_hand() -> None:
    # a beats b 3 times in 4 (a tie counts half): the MLE is σ(β_a − β_b) = 3/4.
    rows = [("a", "b", 1.0), ("a", "b", 1.0), ("b", "a", 1.0), ("a", "b", 1.0)]
    rows += [("a", "b", 0.5), ("a", "b", 0.5)]  # +1 win for each: 4 of 6
    beta = fit(Battles.of(rows), prior_precision=0)
    assert beta[0] - beta[1] == pytest.approx(math.log(2), abs=1e-6)  # odds 4:2
    # With the prior, β_a = −β_b = d/2 where the derivative of
    # −4 log σ(d) − 2 log σ(−d) + λ d² / 4 vanishes: 6 σ(d) − 4 + λ d / 2 = 0.
    d = optimize.brentq(lambda d: 6 / (1 + math.exp(-d)) - 4 + PRIOR_PRECISION * d / 2, 0, 5)
    assert d < math.log(2)  # pulled towards 0
    board = ratings(rows)
    top = board.ratings[0]
    assert top.model == "a" and top.rating == pytest.approx(1000 + SCALE * d / 2, abs=1e-3)
    assert board.win_rates[0, 1] == pytest.approx(4 / 6) and board.win_rates[1, 0] == pytest.approx(
        2 / 6
    )
    assert board.mle_exists


def test_one_battle_stays_finite_and_says_little() -> None:
    """One battle gave 2,361 vs −361 with zero-width intervals: now the prior holds the
    ratings near 1000, the intervals span hundreds of points and overlap, and the board says
    the maximum-likelihood fit does not exist."""
    board = ratings([("a", "b", 1.0)])
    # By hand: the mode solves −(1 − σ(d)) + λ d / 2 = 0 for d = β_a − β_b.
    d = optimize.brentq(lambda d: -(1 - 1 / (1 + math.exp(-d))) + PRIOR_PRECISION * d / 2, 0, 10)
    by = {r.model: r for r in board.ratings}
    assert by["a"].rating == pytest.approx(1000 + SCALE * d / 2, abs=1e-3)
    assert by["b"].rating == pytest.approx(1000 - SCALE * d / 2, abs=1e-3)
    assert 100 < by["a"].rating - 1000 < 200
    for r in board.ratings:
        assert r.high - r.low > 600 and r.rank == 1
    assert not board.mle_exists and board.undefeated == ["a"] and board.winless == ["b"]


def test_a_chain_of_clean_sweeps_stays_finite() -> None:
    """a 5–0 b, b 5–0 c gave 3,872 / 1,000 / −1,872."""
    rows = [("a", "b", 1.0)] * 5 + [("b", "c", 1.0)] * 5
    board = ratings(rows)
    by = {r.model: r for r in board.ratings}
    assert by["a"].rating > by["b"].rating > by["c"].rating
    assert by["a"].rating - by["c"].rating < 1200
    assert not board.mle_exists and board.undefeated == ["a"] and board.winless == ["c"]
    # A single loss of a to c closes the cycle: the maximum-likelihood fit exists.
    assert ratings([*rows, ("c", "a", 1.0)]).mle_exists


def test_small_random_boards_keep_a_sane_spread() -> None:
    """Random 30-battle boards among five equal models spread 3,000–14,000 Elo before."""
    for seed in range(20):
        rows = arena(100 + seed, dict.fromkeys("abcde", 0.0), 30)
        board = ratings(rows)
        spread = board.ratings[0].rating - board.ratings[-1].rating
        assert spread < 700, (seed, spread)
        assert all(r.high - r.low > 200 for r in board.ratings)


def test_intervals_are_deterministic_and_ranks_follow_their_overlap() -> None:
    rows = arena(7, {"strong": 2.0, "mid": 0.0, "weak": -2.0, "mid2": 0.05}, 1500)
    first, again = ratings(rows), ratings(rows)
    assert first.ratings == again.ratings
    assert np.array_equal(first.win_rates, again.win_rates, equal_nan=True)
    by = {r.model: r for r in first.ratings}
    assert (first.ratings[0].model, first.ratings[-1].model) == ("strong", "weak")
    for r in first.ratings:
        assert r.low <= r.rating <= r.high
    assert by["strong"].high < 2000 and by["strong"].low > by["mid"].high  # apart
    assert by["strong"].rank == 1 and by["weak"].rank == 4
    assert by["mid"].rank == by["mid2"].rank == 2  # overlapping: tied
    assert sum(r.battles for r in first.ratings) == 2 * 1500
    assert first.mle_exists


def test_bad_outcomes_are_refused() -> None:
    with pytest.raises(ValueError, match="An outcome is 1"):
        Battles.of([("a", "b", 2)])


def reference_length_fit(rows: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, φ) maximising Σ y log σ(a + φ t) + (1 − y) log σ(−a − φ t), t = tanh(Δ / sd(Δ))."""
    deltas = np.array([d for _, d in rows])
    t = np.tanh(deltas / deltas.std())

    def nll(params: np.ndarray) -> float:
        total = 0.0
        for (y, _), tt in zip(rows, t, strict=True):
            z = params[0] + params[1] * tt
            total -= y * -math.log1p(math.exp(-z)) + (1 - y) * -math.log1p(math.exp(z))
        return total

    found = optimize.minimize(nll, np.zeros(2), method="BFGS", options={"gtol": 1e-10})
    return float(found.x[0]), float(found.x[1])


def test_length_control_takes_a_length_preference_out() -> None:
    rng = random.Random(5)
    rows = []
    for _ in range(2000):
        delta = rng.gauss(3, 4)  # the model mostly answers longer than the baseline
        p = 1 / (1 + math.exp(-2 * math.tanh(delta / 4)))  # the judge likes length, nothing else
        rows.append((1.0 if rng.random() < p else 0.0, delta))
    found = length_controlled("verbose", rows)
    assert found.raw > 0.65 and abs(found.controlled - 0.5) < 0.06
    assert found.length_difference == pytest.approx(np.mean([d for _, d in rows]))
    a, _ = reference_length_fit(rows)
    assert found.controlled == pytest.approx(1 / (1 + math.exp(-a)), abs=1e-6)


def test_equal_lengths_leave_the_win_rate_as_it_is() -> None:
    rows = [(1.0, 0.0)] * 7 + [(0.5, 0.0)] * 2 + [(0.0, 0.0)] * 3
    found = length_controlled("same", rows)
    assert found.raw == pytest.approx(8 / 12) and found.controlled == pytest.approx(
        8 / 12, abs=1e-6
    )
