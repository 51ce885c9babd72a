"""Agreement between people who rated the same units: Krippendorff's α, Fleiss' κ and
percent agreement, on a reliability matrix (units × raters, NaN where a rater gave no value).

Krippendorff's α (Krippendorff, "Computing Krippendorff's Alpha-Reliability", 2011): from the
coincidence matrix o (every ordered pair of values within a unit, weighted 1 / (m_u − 1) for a
unit of m_u values; units with one value are not pairable), α = 1 − D_o / D_e with
D_o = Σ o_ck δ²_ck / n and D_e = Σ n_c n_k δ²_ck / (n (n − 1)). The metric δ² follows the
subject's scale: nominal (0 or 1), ordinal (the ranks between c and k, from the marginals) or
interval ((c − k)²). Missing values are allowed anywhere.

Fleiss' κ, for categorical subjects, in its form for units rated by different numbers of
raters: P̄ is the mean over units of the share of agreeing rater pairs
Σ_j n_uj (n_uj − 1) / (m_u (m_u − 1)), P_e = Σ_j p_j² with p_j the share of all ratings in
category j, κ = (P̄ − P_e) / (1 − P_e). With every unit rated by the same raters it is
Fleiss' (1971) κ. Percent agreement is P̄ itself.
"""

import math
from collections.abc import Sequence

import numpy as np

LEVELS = ("nominal", "ordinal", "interval")


def _pairable(matrix: "Sequence[Sequence[float]] | np.ndarray") -> np.ndarray:
    data = np.asarray(matrix, dtype=float)
    if data.ndim != 2:
        raise ValueError("A reliability matrix is units × raters.")
    return data[np.sum(~np.isnan(data), axis=1) >= 2]


def _counts(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values seen and each unit's count of each value (units × values)."""
    values = np.unique(data[~np.isnan(data)])
    counts = np.zeros((len(data), len(values)))
    for unit, row in enumerate(data):
        present = row[~np.isnan(row)]
        counts[unit] = np.bincount(np.searchsorted(values, present), minlength=len(values))
    return values, counts


def _delta(values: np.ndarray, marginals: np.ndarray, level: str) -> np.ndarray:
    if level == "nominal":
        return 1.0 - np.eye(len(values))
    if level == "interval":
        return np.subtract.outer(values, values) ** 2
    if level == "ordinal":
        cumulative = np.cumsum(marginals)
        low = np.minimum.outer(np.arange(len(values)), np.arange(len(values)))
        high = np.maximum.outer(np.arange(len(values)), np.arange(len(values)))
        between = cumulative[high] - np.where(low > 0, cumulative[np.maximum(low - 1, 0)], 0.0)
        return (between - (marginals[low] + marginals[high]) / 2) ** 2
    raise ValueError(f"Unknown level {level!r}: use one of {', '.join(LEVELS)}.")


def krippendorff_alpha(
    matrix: "Sequence[Sequence[float]] | np.ndarray", level: str = "interval"
) -> float | None:
    """α of a units × raters matrix (NaN: no value); None when no unit has two values or
    every value is the same (no expected disagreement)."""
    data = _pairable(matrix)
    if len(data) == 0:
        return None
    values, counts = _counts(data)
    m = counts.sum(axis=1)
    coincidence = np.einsum("uc,uk->ck", counts / (m - 1)[:, None], counts)
    coincidence -= np.diag((counts / (m - 1)[:, None]).sum(axis=0))
    marginals = coincidence.sum(axis=1)
    n = marginals.sum()
    delta = _delta(values, marginals, level)
    expected = (np.outer(marginals, marginals) * delta).sum() / (n * (n - 1))
    if expected == 0:
        return None
    observed = (coincidence * delta).sum() / n
    return float(1 - observed / expected)


def percent_agreement(matrix: "Sequence[Sequence[float]] | np.ndarray") -> float | None:
    """Mean over units (with two values or more) of the share of rater pairs that agree."""
    data = _pairable(matrix)
    if len(data) == 0:
        return None
    _, counts = _counts(data)
    m = counts.sum(axis=1)
    return float(np.mean((counts * (counts - 1)).sum(axis=1) / (m * (m - 1))))


def fleiss_kappa(matrix: "Sequence[Sequence[float]] | np.ndarray") -> float | None:
    """Fleiss' κ of a units × raters matrix of categories (NaN: no value; see the module)."""
    data = _pairable(matrix)
    if len(data) == 0:
        return None
    _, counts = _counts(data)
    m = counts.sum(axis=1)
    observed = float(np.mean((counts * (counts - 1)).sum(axis=1) / (m * (m - 1))))
    shares = counts.sum(axis=0) / counts.sum()
    chance = float((shares**2).sum())
    if math.isclose(chance, 1.0):
        return None
    return (observed - chance) / (1 - chance)
