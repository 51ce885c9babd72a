"""Comparisons you may stop early (#31.4): an anytime-valid confidence sequence for the mean
difference of two models on a growing set of items.

A fixed-sample interval (the board's paired test) is valid once, at a number of items chosen
in advance. Looked at after every new item and stopped as soon as it excludes 0, it declares a
difference that is not there far more often than α (about a third of the time over a thousand
looks at α = 0.05). A confidence sequence is a sequence of intervals that hold *at every
moment at once* with probability 1 − α, so it may be watched continuously and the comparison
stopped whenever it has decided.

This is the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas
("Time-uniform central limit theory and asymptotic confidence sequences", Annals of
Statistics 2024), Robbins' normal-mixture boundary with the running variance:

    mean_t ± σ_t · √( 2(tρ² + 1) / (t²ρ²) · log(√(tρ² + 1) / α) )

ρ sets the moment where it is tightest: ρ² = (−2 log α + log(1 − 2 log α)) / t*, t* the number
of items expected (the paper's choice). It needs no bound on the scores (a 1–10 scale and a
pass rate alike) and a finite variance only; being asymptotic, the variance is estimated from
the items so far, so nothing is decided before MIN_ITEMS items (a handful of ties would give a
variance of 0). tests/leaderboards/test_sequential.py pins the boundary to hand-computed values
and shows its type-I error ≤ α over 1,000 simulated null streams stopped at the first look that
decides, while the fixed-sample test's rises above α.

The `confseq` package on PyPI (the authors' C++ library) ships no wheels for this Python and
needs Boost to build, so the boundary (a line of numpy) is written here.
"""

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
MIN_ITEMS = 30  # no decision before this many paired items: the variance is still a guess
HORIZON = 500  # items where the sequence is tightest when the caller knows no better

BETTER = "better"
WORSE = "worse"
EQUIVALENT = "equivalent"
GOING = "going"
DECISIONS = {
    BETTER: "decided: A better",
    WORSE: "decided: B better",
    EQUIVALENT: "decided: no difference larger than δ",
    GOING: "keep going",
}


def rho_squared(horizon: int, alpha: float = ALPHA) -> float:
    """The mixture's ρ² that makes the boundary tightest at `horizon` items."""
    log_term = -2 * math.log(alpha)
    return (log_term + math.log(1 + log_term)) / max(horizon, 1)


def radius(t: np.ndarray, sd: np.ndarray, horizon: int, alpha: float = ALPHA) -> np.ndarray:
    """The half-width after t items with running standard deviation sd (arrays alike)."""
    t = np.asarray(t, dtype=float)
    r2 = rho_squared(horizon, alpha)
    scale = t * r2 + 1
    return np.asarray(sd, dtype=float) * np.sqrt(
        2 * scale / (t**2 * r2) * np.log(np.sqrt(scale) / alpha)
    )


@dataclass(frozen=True)
class Sequence:
    """The sequence after each item: arrays of the same length as the stream."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def __len__(self) -> int:
        return len(self.mean)


def running(diffs: np.ndarray, horizon: int = HORIZON, alpha: float = ALPHA) -> Sequence:
    """The confidence sequence after each item of a stream of paired differences (A − B per
    item, in the order they arrived). Along the last axis, so a 2-D array is many streams."""
    d = np.asarray(diffs, dtype=float)
    t = np.arange(1, d.shape[-1] + 1, dtype=float)
    mean = np.cumsum(d, axis=-1) / t
    # Running variance (denominator t) from the running sums: fine for scores of a few digits.
    variance = np.maximum(np.cumsum(d**2, axis=-1) / t - mean**2, 0.0)
    half = radius(t, np.sqrt(variance), horizon, alpha)
    return Sequence(mean=mean, low=mean - half, high=mean + half)


def decide(low: float, high: float, t: int, delta: float, higher_is_better: bool = True) -> str:
    """What the sequence at item t says: one model better (the interval excludes 0), no
    difference larger than δ (it lies inside (−δ, δ)), or keep going."""
    if t < MIN_ITEMS or not (math.isfinite(low) and math.isfinite(high)):
        return GOING
    if low > 0 or high < 0:
        return BETTER if (low > 0) == higher_is_better else WORSE
    if delta > 0 and -delta < low and high < delta:
        return EQUIVALENT
    return GOING


def first_decision(
    diffs: np.ndarray,
    delta: float = 0.0,
    horizon: int = HORIZON,
    alpha: float = ALPHA,
    higher_is_better: bool = True,
) -> tuple[str, int | None]:
    """The decision at the first item where the sequence decides, and that item's count
    (GOING and None when it never does)."""
    seq = running(diffs, horizon, alpha)
    for i in range(MIN_ITEMS - 1, len(seq)):
        state = decide(float(seq.low[i]), float(seq.high[i]), i + 1, delta, higher_is_better)
        if state != GOING:
            return state, i + 1
    return GOING, None


def rejects_at_some_look(
    diffs: np.ndarray, alpha: float = ALPHA, anytime: bool = True, horizon: int = HORIZON
) -> np.ndarray:
    """For each stream (rows), whether a look after some item from MIN_ITEMS on declared a
    difference: by the confidence sequence (anytime=True) or by the fixed-sample z interval
    read at every look (what optional stopping does to a test made for one look)."""
    d = np.atleast_2d(np.asarray(diffs, dtype=float))
    if anytime:
        seq = running(d, horizon, alpha)
        low, high = seq.low, seq.high
    else:
        # Here, not at the top: every process imports this module at start-up (leaderboards'
        # ready() → jobs → items → compare), and scipy.stats costs ~0.5 s of CPU (#26.7).
        from scipy import stats as scipy_stats

        t = np.arange(1, d.shape[-1] + 1, dtype=float)
        mean = np.cumsum(d, axis=-1) / t
        variance = np.maximum(np.cumsum(d**2, axis=-1) / t - mean**2, 0.0)
        half = float(scipy_stats.norm.ppf(1 - alpha / 2)) * np.sqrt(variance / t)
        low, high = mean - half, mean + half
    looked = slice(MIN_ITEMS - 1, None)
    return np.any((low[..., looked] > 0) | (high[..., looked] < 0), axis=-1)
