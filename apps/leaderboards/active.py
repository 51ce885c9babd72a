"""Review where it pays (#31.2): active inference for the judge-corrected mean.

A uniform random sample spends reviews alike on items the judge is sure of and items it is
not. Active inference (Zrnic and Candès 2024, "Active Statistical Inference", ICML) draws each
item i into the sample with its own probability π_i, chosen from what is known before anyone
reviews it (the judge's uncertainty: rounds that disagree, a value near the pass mark), and
weights each review by 1/π_i:

    θ = mean over all N items of  λ·judge_i + (person_i − λ·judge_i) · ξ_i / π_i

where ξ_i is 1 when the item was drawn (and reviewed). Whatever the π_i (as long as each is
above 0 and fixed before the review), E[ξ_i / π_i] = 1, so θ is unbiased for the people's mean
however wrong the judge is; its 95 % interval is θ ± z · sd(terms) / √N. The variance is
smallest when π_i is proportional to the spread of person − judge on item i (the paper's
rule), so reviews go where the judge is least sure. λ is power-tuned like PPI++: the value that
minimises the terms' variance, estimated from the same data and clipped to [0, 1].

With every π_i = n/N this is the uniform design; the board's random sample (apps.review.sample)
is that design with exactly n items, for which apps.leaderboards.ppi is the sharper formula.

The estimate must use each item's probability as it was when the item was drawn, never one
recomputed from a judge that has since changed: the caller passes the recorded values.

ppi-python 0.2.3 has no active-inference function (its authors' experiment code is no
package), so this is written here with numpy, pinned in tests to hand-computed values and to
the exact expectation over every possible draw, and checked by simulation:
tests/leaderboards/test_active.py.
"""

import math

import numpy as np
from scipy import stats as scipy_stats

from apps.leaderboards.ppi import LEVEL, Estimate


def tuned_lambda(y: np.ndarray, yhat: np.ndarray, weight: np.ndarray) -> float:
    """The λ that minimises the variance of λ·yhat + (y − λ·yhat)·weight over all items
    (weight = ξ/π, 0 where not drawn; y may be anything there): −Cov(a, b) / Var(a) with
    a = yhat·(1 − weight) and b = y·weight, clipped to [0, 1]."""
    a = yhat * (1 - weight)
    b = np.where(weight > 0, y, 0.0) * weight
    variance = float(a.var())
    if not variance > 0:
        return 0.0
    covariance = float(np.mean((a - a.mean()) * (b - b.mean())))
    return float(np.clip(-covariance / variance, 0.0, 1.0))


def active_terms(
    y: np.ndarray, yhat: np.ndarray, labelled: np.ndarray, pi: np.ndarray, lam: float
) -> np.ndarray:
    """Each item's term λ·judge + (person − λ·judge)·ξ/π; the estimate is their mean."""
    weight = np.where(labelled, 1.0 / np.where(labelled, pi, 1.0), 0.0)
    return lam * yhat + np.where(labelled, y - lam * yhat, 0.0) * weight


def active_mean(
    y: np.ndarray,
    yhat: np.ndarray,
    labelled: np.ndarray,
    pi: np.ndarray,
    lam: float | None = None,
    level: float = LEVEL,
) -> Estimate | None:
    """The actively sampled estimate of the people's mean over all items: the judge's value
    `yhat` on every item, the person's `y` where `labelled` (drawn with probability `pi` and
    reviewed; anything elsewhere). None with fewer than two labelled items."""
    y, yhat = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    labelled, pi = np.asarray(labelled, dtype=bool), np.asarray(pi, dtype=float)
    size, n = len(yhat), int(labelled.sum())
    if n < 2 or len(y) != size or len(pi) != size or np.any(pi[labelled] <= 0):
        return None
    if lam is None:
        lam = tuned_lambda(y, yhat, np.where(labelled, 1.0 / np.where(labelled, pi, 1.0), 0.0))
    terms = active_terms(y, yhat, labelled, pi, lam)
    mean = float(terms.mean())
    se = float(terms.std() / math.sqrt(size))
    z = float(scipy_stats.norm.ppf(0.5 + level / 2))
    return Estimate(
        mean=mean,
        low=mean - z * se,
        high=mean + z * se,
        se=se,
        lam=float(lam),
        n=n,
        unlabelled=size - n,
        judge_mean=float(yhat.mean()),
        human_var=float(y[labelled].var()),
    )


def reviews_for_width(
    y: np.ndarray,
    yhat: np.ndarray,
    labelled: np.ndarray,
    pi: np.ndarray,
    lam: float,
    shape: np.ndarray,
    target_width: float,
    level: float = LEVEL,
    se: float | None = None,
) -> int | None:
    """How many reviews in all (expected) bring the interval to at most `target_width`, if
    items are drawn with probabilities min(1, k·shape_i) (shape all ones: uniform; the
    uncertainty weights: active). None when reviewing every item would not get there.

    The estimate's variance is (1/N)·Var(person) + (1/N²)·Σ r_i²·(1 − π_i)/π_i with
    r_i = person − λ·judge: the people's own spread, plus what not reviewing everything costs.
    The sum over all items is estimated from the reviews so far, each weighted by 1/π_i (its
    recorded probability), which is unbiased for it; the smallest k that meets the target is
    found by bisection (the variance falls as k grows), and the reviews are Σ min(1, k·shape_i).
    With `se`, the estimate's own standard error now, the first part is what is left of se²
    after the second at the current probabilities, so the curve passes through the width the
    estimate has (the people's spread from a few reviews drawn unevenly is a poor guess).
    """
    y, yhat = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    labelled, pi = np.asarray(labelled, dtype=bool), np.asarray(pi, dtype=float)
    shape = np.asarray(shape, dtype=float)
    size = len(yhat)
    if labelled.sum() < 2 or target_width <= 0 or np.any(shape <= 0):
        return None
    r2_weighted = (y[labelled] - lam * yhat[labelled]) ** 2 / pi[labelled]
    shape_labelled = shape[labelled]
    human_var = float(y[labelled].var())
    z = float(scipy_stats.norm.ppf(0.5 + level / 2))
    allowed = (target_width / (2 * z)) ** 2

    def cost(drawn: np.ndarray) -> float:
        return float((r2_weighted * (1 - drawn) / drawn).sum()) / size**2

    base = human_var / size
    if se is not None:
        base = max(0.0, se**2 - cost(pi[labelled]))

    def variance(k: float) -> float:
        return base + cost(np.minimum(1.0, k * shape_labelled))

    low, high = 0.0, 1.0 / float(shape.min())  # at `high` every item is drawn
    if variance(high) > allowed:
        return None
    for _ in range(60):
        middle = (low + high) / 2
        if middle > 0 and variance(middle) <= allowed:
            high = middle
        else:
            low = middle
    return min(size, math.ceil(float(np.minimum(1.0, high * shape).sum()) - 1e-9))
