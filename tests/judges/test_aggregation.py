"""Combining rounds: every aggregation method, mode ties, spread, per-subject rounds."""

import math

import pytest

from apps.judges.aggregation import METHODS, aggregate, aggregate_rounds, spread


def test_methods_match_the_judge_model_choices() -> None:
    from apps.judges.models import Judge

    assert set(METHODS) == set(Judge.Aggregation.values)


@pytest.mark.parametrize(
    ("values", "method", "expected"),
    [
        ([4, 5, 3], "mean", 4.0),
        ([4, 5], "mean", 4.5),
        ([1, 2, 2], "mean", 5 / 3),
        ([0.1, 0.2, 0.3], "mean", 0.2),
        ([4, 5, 3], "sum", 12.0),
        ([0.1, 0.2, 0.3], "sum", 0.6),
        ([4, 5, 3], "min", 3.0),
        ([4, -5, 3], "min", -5.0),
        ([4, 5, 3], "max", 5.0),
        ([4.5, 4.25], "max", 4.5),
        ([4, 5, 4], "mode", 4.0),
        ([5, 3, 5, 3, 5], "mode", 5.0),
        ([2.5, 2.5, 1], "mode", 2.5),
        ([7], "mean", 7.0),
        ([7], "sum", 7.0),
        ([7], "min", 7.0),
        ([7], "max", 7.0),
        ([7], "mode", 7.0),
        ([100, 0, 100], "mode", 100.0),
        ([100, 0, 100], "mean", 200 / 3),
    ],
)
def test_aggregate(values: list, method: str, expected: float) -> None:
    result = aggregate(values, method)
    assert math.isclose(result, expected)
    assert type(result) is float


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # Ties go to the smallest of the most frequent values, whatever the round order.
        ([4, 5], 4.0),
        ([5, 4], 4.0),
        ([4, 5, 4, 5], 4.0),
        ([5, 5, 4, 4], 4.0),
        ([1, 2, 3], 1.0),
        ([3, 2, 1], 1.0),
        ([100, 0], 0.0),
        ([5, 5, 3, 3, 1], 3.0),
        ([-1, 1], -1.0),
        ([2.5, 2, 2.5, 2], 2.0),
    ],
)
def test_mode_ties_go_to_the_smallest(values: list, expected: float) -> None:
    assert aggregate(values, "mode") == expected


def test_mode_treats_int_and_float_of_the_same_value_as_one() -> None:
    assert aggregate([4, 4.0, 5], "mode") == 4.0


@pytest.mark.parametrize("method", METHODS)
def test_aggregate_of_nothing_is_an_error(method: str) -> None:
    with pytest.raises(ValueError, match=r"Nothing to aggregate: there are no round values\."):
        aggregate([], method)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_aggregate_refuses_non_finite_values(bad: float) -> None:
    with pytest.raises(ValueError, match="must be finite numbers"):
        aggregate([1, bad], "mean")


def test_unknown_method_names_the_known_ones() -> None:
    with pytest.raises(ValueError) as caught:
        aggregate([1, 2], "median")
    assert (
        str(caught.value) == "Unknown aggregation 'median'; use one of mean, sum, min, max, mode."
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([4, 5, 3], 2.0),
        ([4, 4, 4], 0.0),
        ([4], 0.0),
        ([], 0.0),
        ([-1, 1], 2.0),
        ([0.5, 0.25], 0.25),
    ],
)
def test_spread_is_max_minus_min(values: list, expected: float) -> None:
    assert spread(values) == expected


def test_aggregate_rounds_gives_value_and_spread_per_subject() -> None:
    rounds = [
        {"accuracy": 4.0, "clarity": 3.0},
        {"accuracy": 5.0, "clarity": 3.0},
        {"clarity": 5.0, "accuracy": 4.0},
    ]
    assert aggregate_rounds(rounds, "mean") == {
        "accuracy": (13 / 3, 1.0),
        "clarity": (11 / 3, 2.0),
    }
    assert aggregate_rounds(rounds, "mode") == {"accuracy": (4.0, 1.0), "clarity": (3.0, 2.0)}


def test_aggregate_rounds_refuses_incomplete_rounds() -> None:
    with pytest.raises(ValueError, match=r"A round has no value for 'clarity'\."):
        aggregate_rounds([{"accuracy": 4, "clarity": 3}, {"accuracy": 5}], "mean")
    with pytest.raises(ValueError, match="there are no rounds"):
        aggregate_rounds([], "mean")
