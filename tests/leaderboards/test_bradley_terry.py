"""Bradley–Terry ratings (#13.4), pinned: against a reference maximum-likelihood fit written
here (a direct scipy minimisation of the same likelihood, battle by battle, first model
anchored) to 1e-6; a hand case; seeded, stable bootstrap intervals; ranks by CI overlap."""

import math
import random

import numpy as np
import pytest
from scipy import optimize

from apps.leaderboards.bradley_terry import SCALE, Battles, fit, length_controlled, ratings


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


def test_the_fit_matches_a_reference_maximum_likelihood_fit() -> None:
    rows = arena(1, {"alpha": 1.0, "beta": 0.4, "gamma": 0.0, "delta": -0.7}, 400)
    found = Battles.of(rows)
    ours = fit(found)
    reference = reference_fit(rows, found.models)
    # The ridge (1e-8) moves the optimum by far less than 1e-6.
    assert np.allclose(ours, reference, atol=1e-6)


def test_two_models_by_hand() -> None:
    # a beats b 3 times in 4 (a tie counts half): the MLE is σ(β_a − β_b) = 3/4.
    rows = [("a", "b", 1.0), ("a", "b", 1.0), ("b", "a", 1.0), ("a", "b", 1.0)]
    rows += [("a", "b", 0.5), ("a", "b", 0.5)]  # +1 win for each: 4 of 6
    beta = fit(Battles.of(rows))
    assert beta[0] - beta[1] == pytest.approx(math.log(2), abs=1e-6)  # odds 4:2
    board = ratings(rows, rounds=50)
    top = board.ratings[0]
    assert top.model == "a" and top.rating == pytest.approx(
        1000 + SCALE * math.log(2) / 2, abs=1e-3
    )
    assert board.win_rates[0, 1] == pytest.approx(4 / 6) and board.win_rates[1, 0] == pytest.approx(
        2 / 6
    )


def test_bootstrap_intervals_are_seeded_and_ranks_follow_their_overlap() -> None:
    rows = arena(7, {"strong": 2.0, "mid": 0.0, "weak": -2.0, "mid2": 0.05}, 1500)
    first, again = ratings(rows, rounds=200, seed=3), ratings(rows, rounds=200, seed=3)
    assert first.ratings == again.ratings
    assert np.array_equal(first.win_rates, again.win_rates, equal_nan=True)
    other = ratings(rows, rounds=200, seed=4)
    assert [r.low for r in other.ratings] != [r.low for r in first.ratings]
    by = {r.model: r for r in first.ratings}
    assert (first.ratings[0].model, first.ratings[-1].model) == ("strong", "weak")
    for r in first.ratings:
        assert r.low <= r.rating <= r.high
    assert by["strong"].high < 2000 and by["strong"].low > by["mid"].high  # apart
    assert by["strong"].rank == 1 and by["weak"].rank == 4
    assert by["mid"].rank == by["mid2"].rank == 2  # overlapping: tied
    assert sum(r.battles for r in first.ratings) == 2 * 1500


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
