"""The check report's statistics pinned by hand: Cohen's κ, accuracy after rounding to the
scale's steps, mean absolute difference, and κ undefined where chance agreement is total."""

import csv
import io

import numpy as np
import pytest

from apps.leaderboards.alignment import cohen_kappa, metrics
from apps.leaderboards.exports import records_csv
from apps.leaderboards.management.commands.judge_alignment import HEADER, csv_rows
from apps.leaderboards.stats import confusion, weighted_kappa


def test_cohens_kappa_by_hand() -> None:
    # p_o = 35/50 = 0.7; p_e = (25·30 + 25·20) / 50² = 0.5; κ = (0.7 − 0.5) / (1 − 0.5) = 0.4
    assert cohen_kappa(np.array([[20, 5], [10, 15]])) == pytest.approx(0.4)
    assert cohen_kappa(np.array([[7, 0], [0, 0]])) is None  # one category: undefined
    assert cohen_kappa(np.zeros((2, 2), dtype=int)) is None


def test_metrics_round_to_the_scale_and_keep_raw_differences() -> None:
    judged = np.array([4.4, 2.0, 5.0, 1.0])
    people = np.array([4.0, 3.0, 5.0, 1.4])
    found = metrics(judged, people, 1, 5)
    # 4.4→4 = 4, 2 ≠ 3, 5 = 5, 1 = 1.4→1: three of four agree after rounding.
    assert found.accuracy == 0.75
    assert found.mad == pytest.approx((0.4 + 1.0 + 0.0 + 0.4) / 4)
    categories = [1.0, 2.0, 3.0, 4.0, 5.0]
    matrix = confusion([4, 2, 5, 1], [4, 3, 5, 1], categories)
    assert found.kappa == pytest.approx(cohen_kappa(matrix))
    assert found.weighted_kappa == pytest.approx(weighted_kappa(matrix, categories))
    # κ by hand on these four: p_o = 3/4; p_e = (1·1 + 1·0 + 0·1 + 1·1 + 1·1)/16 = 3/16.
    assert found.kappa == pytest.approx((0.75 - 3 / 16) / (1 - 3 / 16))
    assert found.accuracy_ci.low <= found.accuracy <= found.accuracy_ci.high
    assert found.mad_ci.low <= found.mad <= found.mad_ci.high
    # Seeded: the same data gives the same intervals.
    again = metrics(judged, people, 1, 5)
    assert (again.mad_ci, again.accuracy_ci) == (found.mad_ci, found.accuracy_ci)


def test_judge_alignment_csv_neutralises_item_keys() -> None:
    metrics_record = {
        "accuracy": 1.0,
        "accuracy_ci": [1.0, 1.0],
        "kappa": None,
        "weighted_kappa": 0.5,
        "weighted_kappa_ci": None,
        "mad": 0.0,
        "mad_ci": [0.0, 0.0],
    }
    record = {
        "seed": 3,
        "subjects": [
            {
                "subject": "accuracy",
                "n": 2,
                "verdict": "better",
                "this_version": metrics_record,
                "reviewed": metrics_record | {"mad": 1.5},
            }
        ],
        "items": [{"run": 1, "item": "=cmd|' /C calc'!A0"}, {"run": 1, "item": "q2"}],
    }
    text = records_csv(HEADER, csv_rows(record))
    rows = list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"))))
    assert [(r["values"], r["mad"]) for r in rows] == [("this_version", "0.0"), ("reviewed", "1.5")]
    assert rows[0]["held_out_items"] == "'=cmd|' /C calc'!A0|q2"
    assert (rows[0]["kappa"], rows[0]["weighted_kappa_low"], rows[0]["seed"]) == ("", "", "3")


def test_weighted_kappa_interval_keeps_resamples_whose_kappa_is_zero() -> None:
    """#29.9: a resample where the judge used one category has κ = 0 exactly (no better than
    chance); it belongs in the interval. Pinned to statsmodels' quadratic-weighted κ over the
    same seeded resamples (the report's own draw)."""
    from statsmodels.stats.inter_rater import cohens_kappa

    from apps.leaderboards import alignment

    judged = np.array([3, 3, 3, 3, 3, 3, 3, 4, 3, 3], dtype=float)
    people = np.array([3, 4, 2, 3, 5, 3, 1, 4, 2, 3], dtype=float)
    found = metrics(judged, people, 1, 5)
    categories = [1.0, 2.0, 3.0, 4.0, 5.0]
    picks = np.random.default_rng(alignment.SEED).integers(
        0, len(judged), size=(alignment.RESAMPLES, len(judged))
    )[:500]
    kappas = []
    for pick in picks:
        matrix = confusion(judged[pick], people[pick], categories)
        if (matrix.sum(axis=1) == matrix.sum()).any() and (
            matrix.sum(axis=0) == matrix.sum()
        ).any():
            kappas.append(np.nan)  # both raters used one category: κ undefined
        else:
            kappas.append(cohens_kappa(matrix, wt="quadratic", return_results=False))
    kappas_array = np.array(kappas, dtype=float)
    zero = int((kappas_array == 0).sum())
    assert zero > 100  # the case the old `or np.nan` dropped
    low, high = np.nanpercentile(kappas_array, [2.5, 97.5])
    assert found.weighted_kappa_ci is not None
    assert (found.weighted_kappa_ci.low, found.weighted_kappa_ci.high) == pytest.approx(
        (low, high), abs=1e-9
    )
