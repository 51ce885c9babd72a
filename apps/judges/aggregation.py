"""Combining a judge's rounds into one value per subject. Pure Python, no Django."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

METHODS = ("mean", "sum", "min", "max", "mode")


def _checked(values: Sequence[float]) -> list[float]:
    numbers = [float(value) for value in values]
    if not numbers:
        raise ValueError("Nothing to aggregate: there are no round values.")
    if not all(math.isfinite(number) for number in numbers):
        raise ValueError(f"Round values must be finite numbers, got {list(values)!r}.")
    return numbers


def aggregate(values: Sequence[float], method: str) -> float:
    """One value from several rounds: mean, sum, min, max or mode.

    Mode ties go to the smallest of the most frequent values: rounds 4, 5, 4, 5 give 4. This
    is the cautious reading when the judge disagrees with itself, and it does not depend on
    the order the rounds finished in (a rerun of failed rounds may finish them in any order).
    An empty list raises ValueError, as does an unknown method or a non-finite value.
    """
    if method not in METHODS:
        raise ValueError(f"Unknown aggregation {method!r}; use one of {', '.join(METHODS)}.")
    numbers = _checked(values)
    if method == "mean":
        return math.fsum(numbers) / len(numbers)
    if method == "sum":
        return math.fsum(numbers)
    if method == "min":
        return min(numbers)
    if method == "max":
        return max(numbers)
    counts = Counter(numbers)
    top = max(counts.values())
    return min(value for value, count in counts.items() if count == top)


def spread(values: Sequence[float]) -> float:
    """Disagreement between rounds: max - min (0 for one round, and for none)."""
    if not values:
        return 0.0
    numbers = _checked(values)
    return max(numbers) - min(numbers)


def aggregate_rounds(
    rounds: Sequence[Mapping[str, float]], method: str
) -> dict[str, tuple[float, float]]:
    """Per subject, (aggregated value, spread) over rounds that each hold every subject.

    The subjects are those of the first round; a round lacking one raises ValueError, since an
    item whose rounds are incomplete is a failed item, not a smaller sample.
    """
    if not rounds:
        raise ValueError("Nothing to aggregate: there are no rounds.")
    result: dict[str, tuple[float, float]] = {}
    for subject in rounds[0]:
        try:
            values = [round_values[subject] for round_values in rounds]
        except KeyError:
            raise ValueError(f"A round has no value for {subject!r}.") from None
        result[subject] = (aggregate(values, method), spread(values))
    return result
