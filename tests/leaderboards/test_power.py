"""How many items do I need (#18.6): the compare page gives, per subject, the smallest difference
the paired items at hand detect at 80% power, and the items needed for a difference typed in."""

import math
import re

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats as scipy_stats

from apps.leaderboards.stats import items_needed, minimum_detectable_difference, paired
from tests import factories as f

Z_SUM = 1.959963984540054 + 0.8416212335729143  # z(0.975) + z(0.80), from tables


def test_the_detectable_difference_by_hand() -> None:
    assert minimum_detectable_difference(1.0, 100) == pytest.approx(Z_SUM / 10)
    assert minimum_detectable_difference(0.5, 400) == pytest.approx(Z_SUM * 0.5 / 20)
    assert minimum_detectable_difference(1.0, 1) is None


def test_items_needed_inverts_it_rounding_up() -> None:
    assert items_needed(1.0, 0.28) == math.ceil((Z_SUM / 0.28) ** 2) == 101
    assert items_needed(2.0, -0.5) == math.ceil((Z_SUM * 2 / 0.5) ** 2)  # either direction
    assert items_needed(1.0, 0.0) is None and items_needed(0.0, 0.1) == 2


def test_at_that_difference_a_paired_t_test_has_about_80_percent_power() -> None:
    # The exact power of the two-sided paired t-test (noncentral t) at the normal-approximation
    # MDE: a little under 0.80, since t has heavier tails than z.
    for n in (30, 100, 1000):
        d = minimum_detectable_difference(1.0, n)
        critical = scipy_stats.t.ppf(0.975, n - 1)
        ncp = d * math.sqrt(n)
        power = (
            1
            - scipy_stats.nct.cdf(critical, n - 1, ncp)
            + scipy_stats.nct.cdf(-critical, n - 1, ncp)
        )
        assert 0.77 < power <= 0.80, (n, power)


def test_paired_keeps_the_spread_of_the_differences() -> None:
    a, b = np.array([3.0, 4.0, 5.0, 2.0]), np.array([2.0, 4.0, 3.0, 2.0])
    result = paired(a, b)
    assert result.sd_diff == pytest.approx(np.std([1.0, 0.0, 2.0, 0.0], ddof=1))
    assert result.detectable == pytest.approx(Z_SUM * result.sd_diff / 2)
    assert paired([1.0], [0.0]).detectable is None


@pytest.mark.django_db
def test_the_compare_page_says_it(viewer_client) -> None:
    task = f.make_task("power")
    dataset = f.make_items(task, 40)
    judge = f.make_judge(task, subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    runs = []
    for label, shift in (("a", 0), ("b", 1)):
        run = f.make_judge_run(dataset, judge, source_column="question", label=label)
        f.add_scores(run, {f"k{i}": {"accuracy": 1 + (i + shift * (i % 3)) % 5} for i in range(40)})
        runs.append(run)
    url = reverse("leaderboards:compare", args=[task.slug])
    html = viewer_client.get(url, {"a": runs[0].pk, "b": runs[1].pk, "detect": "0.25"}).text
    values_a = [1 + i % 5 for i in range(40)]
    values_b = [1 + (i + i % 3) % 5 for i in range(40)]
    sd = np.std(np.subtract(values_a, values_b), ddof=1)
    shown = re.search(r'data-stat="detectable">±([\d.]+)<', html)
    assert shown and float(shown.group(1)) == pytest.approx(Z_SUM * sd / math.sqrt(40), abs=0.005)
    needed = re.search(r'data-stat="items_needed">(\d+)<', html)
    assert needed and int(needed.group(1)) == math.ceil((Z_SUM * sd / 0.25) ** 2)
    assert "items to detect 0.25" in html
    # Without a difference typed in, no column for it; a bad value is ignored.
    plain = viewer_client.get(url, {"a": runs[0].pk, "b": runs[1].pk, "detect": "abc"}).text
    assert 'data-stat="items_needed"' not in plain and 'data-stat="detectable"' in plain
