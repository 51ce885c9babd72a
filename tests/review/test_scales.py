"""Which digit keys set what on a subject: two-valued, small integer range, or typed (#11)."""

import pytest

from apps.judges.models import Judge
from apps.review.scales import digit_keys


def judge(kind: str, metric: str = "") -> Judge:
    return Judge(kind=kind, metric=metric)  # unsaved: the keys depend on kind and metric only


@pytest.mark.parametrize(
    ("kind", "metric", "low", "high", "values", "help"),
    [
        # Right or wrong: 0 and 1 give the two ends, whatever the range.
        ("mcq", "", 0, 100, {"0": 0, "1": 100}, [("0", "0 (wrong)"), ("1", "100 (right)")]),
        ("mcq_rule", "", 0, 100, {"0": 0, "1": 100}, [("0", "0 (wrong)"), ("1", "100 (right)")]),
        (
            "metric",
            "exact_match",
            0,
            100,
            {"0": 0, "1": 100},
            [("0", "0 (fail)"), ("1", "100 (pass)")],
        ),
        # Small integer ranges: the digits inside are the values.
        ("rubric", "", 1, 5, {str(d): d for d in range(1, 6)}, [("1–5", "that value")]),
        ("rubric", "", 0, 10, {str(d): d for d in range(10)}, [("0–9", "that value (type 10)")]),
        ("rubric", "", 0, 1, {"0": 0, "1": 1}, [("0–1", "that value")]),
        # Wide or fractional ranges, and continuous metrics: digits set nothing.
        ("rubric", "", 0, 100, {}, [("0–9", "nothing: type the value (0–100)")]),
        ("rubric", "", 0, 2.5, {}, [("0–9", "nothing: type the value (0–2.5)")]),
        ("metric", "token_f1", 0, 100, {}, [("0–9", "nothing: type the value (0–100)")]),
        ("metric", "bleu", 0, 100, {}, [("0–9", "nothing: type the value (0–100)")]),
    ],
)
def test_digit_keys_follow_the_scale(kind, metric, low, high, values, help):
    keys = digit_keys(judge(kind, metric), {"name": "s", "min": low, "max": high})
    assert keys.values == values
    assert keys.help == help


def test_a_subject_without_a_range_has_no_digit_keys():
    keys = digit_keys(judge("rubric"), {"name": "s"})
    assert keys.values == {} and keys.scale == "typed"
