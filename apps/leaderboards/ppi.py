"""Prediction-powered inference for a mean: the judge-corrected score (#31.1).

The judge scores every item; people score a random sample of them. PPI++ (Angelopoulos,
Duchi and Zrnic 2024, "PPI++: Efficient prediction-powered inference") estimates the mean of
the people's values over all items as

    θ = mean(λ · judge on the unlabelled items) + mean(person − λ · judge on the labelled ones)

which is unbiased for any λ as long as the labelled items are a random sample, however wrong
the judge is; its 95 % interval is θ ± z · √(var(λ·judge)/N + var(person − λ·judge)/n). λ is
power-tuned: the value that minimises that variance, estimated from the data and clipped to
[0, 1] (λ = 0 is the people's mean alone, λ = 1 plain PPI).

This is ppi-python's `ppi_mean_ci` / `ppi_mean_pointestimate` (lam=None, the default "overall"
mode, one dimension) and `ppi_mean_pval`, written with numpy and scipy because ppi-python pulls
in numba, scikit-learn and a downloader at run time; tests/leaderboards/test_ppi.py pins every
number here to ppi-python 0.2.3 to 1e-6. The same choices as ppi-python: variances with
denominator n (numpy's default), the judge's variance for λ over labelled and unlabelled items
together with denominator n + N − 1, a normal (z) interval.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A PPI++ mean (or a mean difference) with its interval."""

    mean: float
    low: float
    high: float
    se: float  # standard error of `mean`
    lam: float  # the power-tuning λ used
    n: int  # labelled items: a person's value and the judge's
    unlabelled: int  # items with the judge's value only
    judge_mean: float  # the judge's mean over all n + N items (judge-only, for comparison)
    human_var: float  # variance of the people's values on the labelled items (denominator n)

    @property
    def items(self) -> int:
        return self.n + self.unlabelled

    @property
    def effective_n(self) -> float | None:
        """How many people's labels alone would give an interval this narrow: the variance of
        the people's values over the estimate's variance. Above n when the judge helps; never
        below n by much, since λ = 0 (the people alone) is among the choices."""
        if self.se <= 0 or self.human_var <= 0:
            return None
        return self.human_var / self.se**2

    @property
    def p(self) -> float:
        """Two-sided p-value of "the mean is 0" (for a difference: no difference)."""
        if self.se <= 0:
            return 1.0 if self.mean == 0 else 0.0
        return float(2 * scipy_stats.norm.sf(abs(self.mean) / self.se))


def tuned_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray) -> float:
    """The λ that minimises the estimate's variance, clipped to [0, 1] (ppi-python's
    `_calc_lam_glm` for a mean: Cov(person, judge) / ((1 + n/N) · Var(judge)))."""
    n, big_n = len(y), len(yhat_unlabelled)
    if big_n == 0:
        return 0.0
    # np.cov's bias=True is the 1/n covariance ppi-python takes on the labelled items.
    covariance = float(np.cov(y, yhat, bias=True)[0, 1]) if n > 1 else 0.0
    variance = float(np.var(np.concatenate([yhat, yhat_unlabelled]), ddof=1))
    if not variance > 0:  # a judge that gives every item the same value carries no information
        return 0.0
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_unlabelled: np.ndarray,
    lam: float | None = None,
    level: float = LEVEL,
) -> Estimate | None:
    """The PPI++ estimate of the people's mean from their values `y` on the labelled items,
    the judge's `yhat` on the same items and `yhat_unlabelled` on the rest. None with fewer
    than two labelled items (no variance to go on)."""
    y, yhat = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    yhat_unlabelled = np.asarray(yhat_unlabelled, dtype=float)
    n, big_n = len(y), len(yhat_unlabelled)
    if n < 2 or len(yhat) != n:
        return None
    if lam is None:
        lam = tuned_lambda(y, yhat, yhat_unlabelled)
    rectifier = y - lam * yhat
    if big_n:
        imputed = lam * yhat_unlabelled
        mean = float(imputed.mean() + rectifier.mean())
        variance = float(imputed.var() / big_n + rectifier.var() / n)
    else:  # every item has a person's value: their mean is the answer
        lam, mean, variance = 0.0, float(y.mean()), float(y.var() / n)
    se = math.sqrt(max(variance, 0.0))
    z = float(scipy_stats.norm.ppf(0.5 + level / 2))
    return Estimate(
        mean=mean,
        low=mean - z * se,
        high=mean + z * se,
        se=se,
        lam=float(lam),
        n=n,
        unlabelled=big_n,
        judge_mean=float(np.concatenate([yhat, yhat_unlabelled]).mean()),
        human_var=float(y.var()),
    )


def classical_mean(y: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """The people's mean alone on the labelled items with its normal interval (ppi-python's
    `classical_mean_ci`): what the corrected estimate is compared with."""
    y = np.asarray(y, dtype=float)
    se = float(y.std() / math.sqrt(len(y)))
    z = float(scipy_stats.norm.ppf(0.5 + level / 2))
    mean = float(y.mean())
    return mean, mean - z * se, mean + z * se
