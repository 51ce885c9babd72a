"""Agreement between raters (#12.4), pinned: Krippendorff's α against the `krippendorff`
package (to 1e-9, missing values included) and the worked example of Krippendorff (2011);
Fleiss' κ against the worked example of Fleiss (1971) as Wikipedia gives it and a reference
written here from the definition; percent agreement by hand."""

import itertools

import krippendorff
import numpy as np
import pytest

from apps.leaderboards.reliability import fleiss_kappa, krippendorff_alpha, percent_agreement

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers × 12 units.
EXAMPLE = [
    [1, 1, NAN, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [NAN, 5, 5, 5],
    [NAN, NAN, 1, 1],
    [NAN, NAN, 3, NAN],
]
# Fleiss (1971) via Wikipedia: 10 subjects, 14 raters, counts per category 1..5; κ ≈ 0.210.
FLEISS_COUNTS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def as_matrix(counts: list[list[int]]) -> np.ndarray:
    return np.array([[c + 1 for c, n in enumerate(row) for _ in range(n)] for row in counts], float)


def random_matrix(seed: int, units: int = 25, raters: int = 5, values: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = rng.integers(1, values + 1, size=(units, raters)).astype(float)
    matrix[rng.random(matrix.shape) < 0.35] = np.nan
    return matrix


def test_alpha_matches_krippendorffs_worked_example() -> None:
    assert krippendorff_alpha(EXAMPLE, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(EXAMPLE, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(EXAMPLE, "ordinal") == pytest.approx(0.815, abs=5e-4)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_matches_the_reference_package_with_missing_values(level: str) -> None:
    for seed in range(40):
        matrix = random_matrix(seed)
        ours = krippendorff_alpha(matrix, level)
        reference = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement=level)
        assert ours == pytest.approx(reference, abs=1e-9)
    # Decimal values on an interval scale (a 0–1 subject with halves).
    matrix = random_matrix(99) / 2
    reference = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement="interval")
    assert krippendorff_alpha(matrix, "interval") == pytest.approx(reference, abs=1e-9)


def test_alpha_is_undefined_without_pairs_or_without_variation() -> None:
    assert krippendorff_alpha([[1, NAN], [NAN, 2]], "nominal") is None  # nothing pairable
    assert krippendorff_alpha([[3, 3], [3, 3]], "interval") is None  # no expected disagreement
    assert krippendorff_alpha([[1, 1], [2, 2]], "nominal") == 1.0
    with pytest.raises(ValueError, match="Unknown level"):
        krippendorff_alpha([[1, 2]], "ratio")


def reference_fleiss(matrix: np.ndarray) -> float:
    """Fleiss' κ from its definition, unit by unit, for raters that may differ per unit."""
    categories = sorted({v for row in matrix for v in row if not np.isnan(v)})
    agree, totals, units = [], dict.fromkeys(categories, 0), 0
    for row in matrix:
        present = [v for v in row if not np.isnan(v)]
        if len(present) < 2:
            continue
        units += 1
        pairs = list(itertools.permutations(range(len(present)), 2))
        agree.append(sum(present[i] == present[j] for i, j in pairs) / len(pairs))
        for v in present:
            totals[v] += 1
    p_bar = sum(agree) / units
    everything = sum(totals.values())
    p_e = sum((n / everything) ** 2 for n in totals.values())
    return (p_bar - p_e) / (1 - p_e)


def test_fleiss_kappa_matches_the_worked_example_and_the_definition() -> None:
    matrix = as_matrix(FLEISS_COUNTS)
    assert fleiss_kappa(matrix) == pytest.approx(0.2099, abs=1e-4)
    assert percent_agreement(matrix) == pytest.approx(0.3780, abs=1e-4)
    for seed in range(20):
        missing = random_matrix(seed, values=3)
        assert fleiss_kappa(missing) == pytest.approx(reference_fleiss(missing), abs=1e-9)


def test_percent_agreement_by_hand() -> None:
    # Unit 1: 3 agreeing pairs of 3; unit 2: 0 of 1; unit 3: 1 of 3; unit 4 has one value.
    matrix = [[4, 4, 4], [2, 3, NAN], [5, 5, 4], [1, NAN, NAN]]
    assert percent_agreement(matrix) == pytest.approx((1 + 0 + 1 / 3) / 3)
    assert percent_agreement([[1, NAN]]) is None
