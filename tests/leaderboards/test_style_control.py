"""Bradley–Terry with style control (#31.3), on arrays: the coefficients pinned to
scikit-learn's L2 logistic regression (the declared prior) and, without the prior, to
statsmodels' maximum-likelihood fit, on the same design, to 1e-4; the style counts by hand; a
judge that rewards length alone separates two equal models on the plain fit and not on the
style-controlled one."""

import numpy as np
import pytest
import statsmodels.api as sm
from sklearn.linear_model import LogisticRegression

from apps.leaderboards.bradley_terry import PRIOR_PRECISION, ratings
from apps.leaderboards.style import FEATURES, controlled, design, fit, style_counts

MODELS = ["m0", "m1", "m2", "m3"]


def simulated(n: int = 600, seed: int = 1) -> tuple[list, np.ndarray, np.ndarray]:
    """Battles among four models whose outcomes follow strengths plus a length effect, with
    ties; each answer's (words, headers, list items, bold) drawn at random."""
    rng = np.random.default_rng(seed)
    strength = np.array([0.0, 0.3, -0.2, 0.5])
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    style_a = rng.poisson([80, 1, 3, 2], size=(n, 4))
    style_b = rng.poisson([60, 1, 2, 2], size=(n, 4))
    length = design(
        [(MODELS[i], MODELS[j], 0.0) for i, j in zip(a, b, strict=True)], style_a, style_b
    ).x[:, 4]
    p = 1 / (1 + np.exp(-(strength[a] - strength[b] + 0.8 * length)))
    u = rng.random(n)
    y = np.where(u < 0.85 * p, 1.0, np.where(u > 1 - 0.85 * (1 - p), 0.0, 0.5))
    battles = [(MODELS[i], MODELS[j], float(o)) for i, j, o in zip(a, b, y, strict=True)]
    return battles, style_a, style_b


def as_rows(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each battle as a won row and a lost row weighted by y and 1 − y: a tie is half each."""
    n = len(y)
    return np.vstack([x, x]), np.r_[np.ones(n), np.zeros(n)], np.r_[y, 1 - y]


def test_style_counts_by_hand() -> None:
    text = (
        "# Title\n\nSome **bold** and __also__ words.\n\n- one\n- two\n1. first\n"
        "```python\n# not a header\n- not a list\n**not bold**\n```\n## Next\n"
    )
    words, headers, lists, bold = style_counts(text)
    assert words == len(text.split())
    assert (headers, lists, bold) == (2, 3, 2)  # inside the fence: code, not style
    assert style_counts("") == (0, 0, 0, 0)
    assert style_counts("#not a header, 2.not a list, ** not bold") == (9, 0, 0, 0)


def test_the_design_is_arenas() -> None:
    found = design(
        [("x", "y", 1.0), ("y", "x", 0.5), ("x", "y", 0.0)],
        np.array([[10, 0, 1, 0], [30, 0, 0, 0], [0, 0, 0, 0]]),
        np.array([[30, 0, 0, 0], [10, 0, 2, 0], [0, 0, 0, 0]]),
    )
    assert found.models == ["x", "y"] and found.features == ["length", "lists"]
    assert found.x[:, :2].tolist() == [[1, -1], [-1, 1], [1, -1]]
    raw = np.array([-20 / 41, 20 / 41, 0.0])  # (a − b) / (a + b + 1), then standardised
    assert found.x[:, 2] == pytest.approx((raw - raw.mean()) / raw.std())
    assert found.y.tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(ValueError, match="a tie"):
        design([("x", "y", 0.7)], np.zeros((1, 4)), np.zeros((1, 4)))


def test_coefficients_match_sklearn_with_the_prior() -> None:
    battles, style_a, style_b = simulated()
    found = design(battles, style_a, style_b)
    assert found.features == list(FEATURES)
    w, _ = fit(found)
    x, y, weights = as_rows(found.x, found.y)
    reference = LogisticRegression(
        C=1 / PRIOR_PRECISION, fit_intercept=False, tol=1e-12, max_iter=10_000
    ).fit(x, y, sample_weight=weights)
    assert np.abs(reference.coef_[0] - w).max() < 1e-4
    assert abs(w[:4].sum()) < 1e-9  # the prior centres the models' β by itself


def test_coefficients_match_statsmodels_without_the_prior() -> None:
    battles, style_a, style_b = simulated(seed=2)
    found = design(battles, style_a, style_b)
    w, cov = fit(found, prior_precision=0.0)
    x, y, weights = as_rows(found.x, found.y)
    # The model columns sum to zero: drop the first (its β is 0), then centre as the fit does.
    glm = sm.GLM(y, x[:, 1:], family=sm.families.Binomial(), freq_weights=weights).fit(tol=1e-12)
    beta = np.r_[0.0, glm.params[:3]]
    assert np.abs(np.r_[beta - beta.mean(), glm.params[3:]] - w).max() < 1e-4
    # The style coefficients' standard errors are the same Fisher information's.
    assert np.sqrt(np.diag(cov)[4:]) == pytest.approx(glm.bse[3:], rel=1e-3)


def test_a_judge_that_rewards_length_alone_is_found_out() -> None:
    """Two equally good models; "long" writes twice as many words, and the judge prefers the
    longer answer. The plain fit puts "long" far ahead; at equal style they are level, and
    the length coefficient carries the effect."""
    rng = np.random.default_rng(7)
    n = 400
    long_words = rng.integers(150, 250, n)
    short_words = rng.integers(60, 140, n)
    swap = rng.random(n) < 0.5  # which side each model is shown as
    battles, style_a, style_b = [], np.zeros((n, 4)), np.zeros((n, 4))
    for i in range(n):
        words = {"long": long_words[i], "short": short_words[i]}
        a, b = ("short", "long") if swap[i] else ("long", "short")
        share = (words[a] - words[b]) / (words[a] + words[b] + 1)
        won = rng.random() < 1 / (1 + np.exp(-4 * share))
        battles.append((a, b, float(won)))
        style_a[i, 0], style_b[i, 0] = words[a], words[b]
    plain = {r.model: r for r in ratings(battles).ratings}
    assert plain["long"].low > plain["short"].high  # the plain board sees a clear winner
    found = controlled(battles, style_a, style_b, {m: r.rating for m, r in plain.items()})
    styled = {r.model: r for r in found.ratings}
    assert styled["long"].low < styled["short"].high  # at equal length: not told apart
    assert {r.rank for r in found.ratings} == {1}
    assert abs(styled["long"].rating - styled["short"].rating) < 40
    assert styled["long"].moved is not None and styled["long"].moved < -50
    (length,) = found.coefficients
    assert length.feature == "length" and length.shown and length.low > 0
    assert found.constant == ["headers", "lists", "bold"]
