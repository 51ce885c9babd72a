"""Judge–human agreement over confirmed and overridden scores."""

import re

import pytest
from django.urls import reverse

from apps.leaderboards.agreement import agreement
from apps.review.models import BlindEntry
from tests import factories as f
from tests.base import make_user


@pytest.fixture
def reviewed(db, reviewer_user):
    """Judge said 1 1 2 2 3 3 2 (failed) 1 3 on k0..k9 (1–3 scale).

    k0 k2 k3 k4 confirmed (k0 also has a blind 1); k1 → 2, k5 → 1 (also a blind 1), k7 → 2
    overridden (k7: the judge failed); k6 blind 3 and 3, k8 blind 1 and 2 (unsettled), k9
    blind 3, nobody confirmed or overrode those three. k10 is not reviewed.
    """
    task = f.make_task("demo")
    dataset = f.make_items(task, 11)
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 3}])
    run = f.make_judge_run(dataset, judge, source_column="question")
    values = [1, 1, 2, 2, 3, 3, 2, None, 1, 3, 2]
    f.add_scores(run, {f"k{i}": {"accuracy": v} for i, v in enumerate(values)})
    for key in ("k0", "k2", "k3", "k4"):
        f.score(run, key, "accuracy").confirm(reviewer_user)
    f.score(run, "k1", "accuracy").override(2, reviewer_user, "partly right")
    f.score(run, "k5", "accuracy").override(1, reviewer_user, "wrong")
    f.score(run, "k7", "accuracy").override(2, reviewer_user, "judge failed")  # no judge value
    ann, bob = make_user("reviewer", "ann"), make_user("reviewer", "bob")
    for key, user, value in [
        ("k0", ann, 1),
        ("k5", ann, 1),
        ("k6", ann, 3),
        ("k6", bob, 3),
        ("k8", ann, 1),
        ("k8", bob, 2),
        ("k9", ann, 3),
    ]:
        BlindEntry.objects.create(score=f.score(run, key, "accuracy"), user=user, value=value)
    return {"task": task, "judge": judge, "run": run}


def test_agreement_by_hand(reviewed):
    [row] = agreement(reviewed["task"])
    # Each reviewed item once: confirmed k0 k2 k3 k4, overridden k1 k5 k7, blind only k6 k8 k9.
    assert (row.reviewed, row.confirmed, row.overridden, row.blind_only) == (10, 4, 3, 3)
    assert row.reviewed == row.confirmed + row.overridden + row.blind_only
    # Not compared: k7 (the judge failed), k8 (blind 1 and 2: no human value).
    assert (row.judge_failed, row.unsettled, row.compared) == (1, 1, 8)
    assert row.compared == row.reviewed - row.judge_failed - row.unsettled
    # Pairs (judge, human): k0 (1,1) k1 (1,2) k2 (2,2) k3 (2,2) k4 (3,3) k5 (3,1) k6 (2,3) k9 (3,3).
    assert row.exact == pytest.approx(5 / 8)
    assert row.categories == [1.0, 2.0, 3.0]
    assert row.matrix == [[1, 1, 0], [0, 2, 1], [1, 0, 2]]
    # Quadratic weights (i − j)² / 4; row sums 2 3 3, column sums 2 3 3, N = 8.
    # Observed Σ w·O = ¼·1 + ¼·1 + 1·1 = 1.5; expected Σ w·E = (¼·6 + 1·6 + ¼·9 + 1·6 + ¼·9) / 8
    # = 19.5 / 8 = 2.4375; κ = 1 − 1.5 / 2.4375 = 5/13.
    assert row.kappa == pytest.approx(5 / 13)
    assert row.mean_abs_diff == pytest.approx((1 + 2 + 1) / 8)
    # Blind entries: 7, all on judged scores; equal to the judge: k0 1, k8 ann 1, k9 3.
    assert (row.blind_entries, row.blind_compared, row.blind_agreeing) == (7, 7, 3)
    assert row.blind_exact == pytest.approx(3 / 7)


def test_agreement_is_per_judge_version(reviewed, reviewer_user):
    task = reviewed["task"]
    v2 = f.make_judge(
        task, name="quality", version=2, subjects=[{"name": "accuracy", "min": 1, "max": 3}]
    )
    dataset = reviewed["run"].dataset
    run = f.make_judge_run(dataset, v2, source_column="question")
    f.add_scores(run, {"k0": {"accuracy": 3}})
    f.score(run, "k0", "accuracy").confirm(reviewer_user)
    rows = {(r.judge.version, r.subject): r for r in agreement(task)}
    assert rows[(2, "accuracy")].reviewed == 1 and rows[(2, "accuracy")].exact == 1.0
    assert rows[(2, "accuracy")].kappa is None  # one category only: undefined
    assert rows[(1, "accuracy")].reviewed == 10


def test_agreement_page(reviewed, viewer_client):
    html = viewer_client.get(reverse("leaderboards:agreement", args=["demo"])).content.decode()
    assert 'data-stat="exact">62.5%<' in html
    assert 'data-stat="kappa">0.38<' in html  # 5/13
    counts = {
        stat: int(n) for stat, n in re.findall(r'data-stat="(\w+)">(\d+)<', html) if stat != "kappa"
    }
    assert counts == {
        "reviewed": 10,
        "confirmed": 4,
        "overridden": 3,
        "blind_only": 3,
        "judge_failed": 1,
        "unsettled": 1,
        "compared": 8,
        "blind_entries": 7,
    }
    assert 'data-stat="blind_exact">42.9%<' in html
    # Every count is defined on the page, and how they add up is said.
    definitions = html[html.index('id="agreement-definitions"') :]
    for term in counts:
        assert f"<dt>{term.replace('_', ' ')}</dt>" in definitions
    assert "reviewed = confirmed + overridden + blind only" in definitions
    assert "compared = reviewed − judge failed − unsettled" in definitions
    assert "quadratic" in html
    assert "Confusion matrix" in html


def test_blind_entries_are_reported_apart_from_what_was_seen(reviewed):
    [row] = agreement(reviewed["task"])
    # Seen the judge: confirmations k0 k2 k3 k4 (always agree), overrides k1 and k5 (disagree);
    # k7's override has no judge value to compare with.
    assert (row.anchored, row.anchored_exact) == (6, pytest.approx(4 / 6))
    # Blind (judge, entry) pairs: k0 (1,1) k5 (3,1) k6 (2,3) (2,3) k8 (1,1) (1,2) k9 (3,3).
    assert row.blind_exact == pytest.approx(3 / 7)
    # Confusion (rows judge 1–3, columns blind 1–3): [[2,1,0],[0,0,2],[1,0,1]]; rows 3 2 2,
    # columns 3 1 3, N = 7. Σ w·O = ¼·1 + ¼·2 + 1·1 = 1.75; Σ w·r·c / N = 19.25 / 7 = 2.75.
    assert row.blind_kappa == pytest.approx(1 - 1.75 / 2.75)


def test_the_page_shows_both(reviewed, viewer_client):
    html = viewer_client.get(reverse("leaderboards:agreement", args=["demo"])).content.decode()
    assert re.search(r'data-stat="anchored_exact"[^>]*>66\.7%<', html)
    assert re.search(r'data-stat="blind_kappa">0\.36<', html)
    assert "A confirmation always agrees" in html
