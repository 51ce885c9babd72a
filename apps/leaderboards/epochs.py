"""Repeated generations on the board: how a model's several answers to one item (its epochs)
become the item's one value.

- mean: the mean over epochs (the judge value of a Score: apps.judges.judging).
- majority: the value most epochs got; a tie goes to the worst of the tied values, so a model
  never gains from a coin flip.
- pass@k: the chance that at least one of k epochs drawn without replacement from the item's
  n passes, by the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models
  Trained on Code"): 1 − C(n − c, k) / C(n, k), with c the passing epochs. An epoch passes
  when it has the subject's best value (1 on 0–1, 100 on an MCQ's 0–100, 5 on 1–5). The
  probability is put on the subject's scale (worst + p × (best − worst)), so the board's
  ranges, strict scoring and overall work unchanged. It needs a range.

A human override is the item's value whatever the epochs said: the mean and the majority are
the override, pass@k is 1 if the override is the best value and 0 otherwise.
Each item is one value before anything is averaged, so the board's CIs are over items:
clustered by item, as epochs of one item are not independent.

At scale (#33.2) the same reductions run over whole runs at once: `epoch_matrix` lays the
items' epoch values out as rows, `majority_rows` and `passing` reduce each row as `majority`
and `passes` do one item, and `pass_values` turns (epochs, passing) counts into pass@k. A
judge run stores their results when it ends (apps.leaderboards.items), so a board never
reads the scores' epoch values.
"""

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

HOWS = {"mean": "mean over epochs", "majority": "majority vote", "pass": "pass@k"}


@dataclass(frozen=True)
class Reduction:
    """How the board turns epochs into one value per item: `how` in HOWS, and k for pass@k."""

    how: str = "mean"
    k: int = 1

    @classmethod
    def parse(cls, text: str | None) -> "Reduction":
        """ "mean", "majority" or "pass@K" (K ≥ 1); anything else is the mean."""
        text = (text or "").strip().lower()
        if text == "majority":
            return cls("majority")
        if text.startswith("pass@") and text[5:].isdigit() and int(text[5:]) >= 1:
            return cls("pass", int(text[5:]))
        return cls()

    @property
    def is_mean(self) -> bool:
        return self.how == "mean"

    @property
    def query(self) -> str:
        return f"pass@{self.k}" if self.how == "pass" else self.how

    @property
    def label(self) -> str:
        return f"pass@{self.k}" if self.how == "pass" else HOWS[self.how]

    def capped(self, epochs: int) -> "Reduction":
        """pass@k needs k ≤ the epochs every model has: k is lowered to that."""
        if self.how == "pass" and self.k > epochs:
            return Reduction("pass", max(epochs, 1))
        return self


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of n samples with c correct (HumanEval's numerically stable form)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 ≤ c ≤ n and 1 ≤ k ≤ n (n={n}, c={c}, k={k}).")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def majority(values: Sequence[float], worst: float | None, best: float | None) -> float:
    """The most common value; among tied ones the worst (the lowest when no range says)."""
    counts = Counter(values)
    top = max(counts.values())
    tied = [value for value, count in counts.items() if count == top]
    lower_is_worse = worst is None or best is None or worst <= best
    return min(tied) if lower_is_worse else max(tied)


def passes(value: float, best: float) -> bool:
    return math.isclose(value, best, rel_tol=0, abs_tol=1e-9)


def reduce(
    values: Sequence[float], reduction: Reduction, worst: float | None, best: float | None
) -> float:
    """One item's value from its epochs' values (all present). NaN where pass@k cannot be
    had: no range, or fewer epochs than k."""
    if not values:
        return math.nan
    if reduction.how == "majority":
        return majority(values, worst, best)
    if reduction.how == "pass":
        if worst is None or best is None or len(values) < reduction.k:
            return math.nan
        correct = sum(passes(v, best) for v in values)
        return worst + pass_at_k(len(values), correct, reduction.k) * (best - worst)
    return sum(values) / len(values)


def epoch_matrix(rows: Sequence[Sequence[float | None]]) -> np.ndarray:
    """Items' epoch values as rows of a matrix, NaN where an epoch has no value (and to pad
    the rows of items with fewer epochs)."""
    if rows and len({len(row) for row in rows}) == 1 and rows[0]:
        return np.array(rows, dtype=float).reshape(len(rows), -1)  # None becomes NaN
    width = max((len(row) for row in rows), default=0)
    matrix = np.full((len(rows), max(width, 1)), np.nan)
    for at, row in enumerate(rows):
        matrix[at, : len(row)] = [math.nan if v is None else v for v in row]
    return matrix


def majority_rows(
    matrix: np.ndarray, worst: float | None, best: float | None, chunk: int = 20_000
) -> np.ndarray:
    """`majority` of each row's values (NaN: no value, left out); NaN for a row without any."""
    lower_is_worse = worst is None or best is None or worst <= best
    out = np.full(len(matrix), np.nan)
    side = np.inf if lower_is_worse else -np.inf
    for start in range(0, len(matrix), chunk):
        values = matrix[start : start + chunk]
        # How many of its row's values each value equals (NaN equals nothing): the most
        # common values have the row's largest count; the worst of them wins a tie.
        same = (values[:, :, None] == values[:, None, :]).sum(axis=2)
        top = same.max(axis=1, keepdims=True)
        tied = np.where((same == top) & (same > 0), values, side)
        picked = tied.min(axis=1) if lower_is_worse else tied.max(axis=1)
        out[start : start + chunk] = np.where(np.isinf(picked), np.nan, picked)
    return out


def passing(matrix: np.ndarray, best: float | None) -> np.ndarray:
    """How many of each row's values pass (`passes`: the subject's best value)."""
    if best is None:
        return np.zeros(len(matrix), dtype=np.int64)
    return (np.abs(matrix - best) <= 1e-9).sum(axis=1)


def pass_values(
    epochs: np.ndarray, passed: np.ndarray, k: int, worst: float | None, best: float | None
) -> np.ndarray:
    """pass@k on the subject's scale per item from its epochs with a value and the passing
    ones, as `reduce` gives one item; NaN without a range, or with fewer than k epochs."""
    out = np.full(len(epochs), np.nan)
    if worst is None or best is None:
        return out
    enough = epochs >= k
    pairs, at = np.unique(
        np.stack([epochs[enough], passed[enough]], axis=1).reshape(-1, 2),
        axis=0,
        return_inverse=True,
    )
    chances = np.array([pass_at_k(int(n), int(c), k) for n, c in pairs.tolist()])
    if chances.size:
        out[enough] = worst + chances[at.reshape(-1)] * (best - worst)
    return out


def override_value(
    value: float, reduction: Reduction, worst: float | None, best: float | None
) -> float:
    """A human override under the reduction: itself, or pass/fail for pass@k."""
    if reduction.how == "pass":
        if worst is None or best is None:
            return math.nan
        return best if passes(value, best) else worst
    return value
