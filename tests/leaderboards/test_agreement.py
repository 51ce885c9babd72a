"""Judge–human agreement over confirmed and overridden scores."""

import pytest
from django.urls import reverse

from apps.leaderboards.agreement import agreement
from tests.leaderboards import factories as f


@pytest.fixture
def reviewed(db, reviewer_user):
    """Judge said 1 1 2 2 3 3; people said 1 2 2 2 3 1 (k0, k2, k3, k4 confirmed)."""
    task = f.make_task("demo")
    dataset = f.make_items(task, 8)
    judge = f.make_judge(task, subjects=[{"name": "accuracy", "min": 1, "max": 3}])
    run = f.make_judge_run(task, dataset, judge, source_column="question")
    f.add_scores(run, {f"k{i}": {"accuracy": v} for i, v in enumerate([1, 1, 2, 2, 3, 3, 2, None])})
    for key in ("k0", "k2", "k3", "k4"):
        f.score(run, key, "accuracy").confirm(reviewer_user)
    f.score(run, "k1", "accuracy").override(2, reviewer_user, "partly right")
    f.score(run, "k5", "accuracy").override(1, reviewer_user, "wrong")
    f.score(run, "k7", "accuracy").override(2, reviewer_user, "judge failed")  # no judge value
    # k6 is not reviewed: left out.
    return {"task": task, "judge": judge, "run": run}


def test_agreement_by_hand(reviewed):
    [row] = agreement(reviewed["task"])
    assert (row.reviewed, row.confirmed, row.overridden, row.judge_failed) == (6, 4, 3, 1)
    assert row.exact == pytest.approx(4 / 6)
    assert row.categories == [1.0, 2.0, 3.0]
    assert row.matrix == [[1, 1, 0], [0, 2, 0], [1, 0, 1]]
    assert row.kappa == pytest.approx(1 - 1.25 / 1.75)  # see test_stats: quadratic weights
    assert row.mean_abs_diff == pytest.approx((1 + 2) / 6)


def test_agreement_is_per_judge_version(reviewed, reviewer_user):
    task = reviewed["task"]
    v2 = f.make_judge(task, version=2, subjects=[{"name": "accuracy", "min": 1, "max": 3}])
    dataset = reviewed["run"].dataset
    run = f.make_judge_run(task, dataset, v2, source_column="question")
    f.add_scores(run, {"k0": {"accuracy": 3}})
    f.score(run, "k0", "accuracy").confirm(reviewer_user)
    rows = {(r.judge.version, r.subject): r for r in agreement(task)}
    assert rows[(2, "accuracy")].reviewed == 1 and rows[(2, "accuracy")].exact == 1.0
    assert rows[(2, "accuracy")].kappa is None  # one category only: undefined
    assert rows[(1, "accuracy")].reviewed == 6


def test_agreement_page(reviewed, viewer_client):
    html = viewer_client.get(reverse("leaderboards:agreement", args=["demo"])).content.decode()
    assert 'data-stat="exact">66.7%<' in html
    assert f'data-stat="kappa">{1 - 1.25 / 1.75:.2f}<' in html
    assert "quadratic" in html
    assert "Confusion matrix" in html
