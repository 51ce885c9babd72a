"""Judge–human agreement over confirmed and overridden scores."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from apps.leaderboards import alignment
from apps.leaderboards.agreement import agreement
from apps.leaderboards.stats import same_step
from apps.review.models import BlindEntry, Review, ReviewPolicy
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
        "by_reviews": 0,
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
    assert "reviewed = confirmed + overridden + by reviews + blind only" in definitions
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


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# ---- one definition of agreement, several reviewers in blind mode (#28.6) -------------------
@pytest.fixture
def continuous(db, reviewer_user):
    """A 1–5 judge that gives values between the steps: 2.4, 3.6, 4.0 on k0..k2, overridden
    to 2, 4 and 5 by a reviewer."""
    task = f.make_task("steps")
    dataset = f.make_items(task, 3)
    judge = f.make_judge(task, name="steps", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    run = f.make_judge_run(dataset, judge, source_column="question")
    f.add_scores(run, {"k0": {"accuracy": 2.4}, "k1": {"accuracy": 3.6}, "k2": {"accuracy": 4.0}})
    for key, value in (("k0", 2), ("k1", 4), ("k2", 5)):
        f.score(run, key, "accuracy").override(value, reviewer_user, "on the scale's steps")
    return {"task": task, "judge": judge, "run": run}


def test_the_agreement_and_alignment_pages_share_one_definition(continuous, viewer_client):
    # 2.4 and 2 share the step 2, 3.6 and 4 the step 4; 4.0 and 5 differ: 2 of 3. Equality of
    # raw values (the old agreement page) said 0 of 3 while the alignment page said 2 of 3.
    [row] = agreement(continuous["task"])
    assert row.exact == pytest.approx(2 / 3)
    assert row.anchored_exact == pytest.approx(2 / 3)
    assert row.mean_abs_diff == pytest.approx((0.4 + 0.4 + 1.0) / 3)
    [history] = alignment.history(continuous["judge"])
    [version] = history.by_version
    assert version.agreement == pytest.approx(row.exact)
    page = viewer_client.get(reverse("leaderboards:agreement", args=["steps"])).content.decode()
    assert 'data-stat="exact">66.7%<' in page
    judge_page = viewer_client.get(
        reverse("leaderboards:judge-alignment", args=[continuous["judge"].pk])
    ).content.decode()
    assert "the same definition as on the task's agreement page" in judge_page
    assert re.search(r'data-label="v1">.*? 67%</td>', judge_page)


def test_same_step_rounds_half_up_and_clips_to_the_scale():
    assert same_step(2.5, 3, 1, 5) and not same_step(2.49, 3, 1, 5)
    assert same_step(7, 5, 1, 5) and same_step(0.2, 1, 1, 5)  # outside the scale: its ends
    assert same_step(0.4, 0, 0, 1) and not same_step(0.5, 0, 0, 1)


def test_reviews_given_in_blind_mode_count_as_blind_values(db, reviewer_user):
    """Two reviewers per item, in blind mode, through the review page's form: their reviews
    are the unanchored values of the agreement page, and the settled score counts as 'by
    reviews', not as a confirmation or an override made with the judge in view."""
    task = f.make_task("pair")
    dataset = f.make_items(task, 3)
    judge = f.make_judge(task, name="pair", subjects=[{"name": "accuracy", "min": 1, "max": 3}])
    run = f.make_judge_run(dataset, judge, source_column="question")
    f.add_scores(run, {"k0": {"accuracy": 1}, "k1": {"accuracy": 2}, "k2": {"accuracy": 3}})
    ReviewPolicy.objects.create(task=task, reviews_per_item=2, thresholds={"accuracy": 0})
    ann, bob = make_user("reviewer", "ann"), make_user("reviewer", "bob")
    # k0: both 1 (= judge, consensus); k1: both 3 (consensus 3, judge 2); k2: 3 and 2 (open).
    for key, values in (("k0", (1, 1)), ("k1", (3, 3)), ("k2", (3, 2))):
        score = f.score(run, key, "accuracy")
        for user, value in zip((ann, bob), values, strict=True):
            answer = client_for(user).post(
                reverse("review:submit", args=[score.pk]),
                {"value": str(value), "reason": "mine", "shown_at": "0", "blind": "1"},
            )
            assert answer.status_code in (200, 302)
    assert Review.objects.filter(blind=True).count() == 6
    [row] = agreement(task)
    assert (row.reviewed, row.by_reviews, row.confirmed, row.overridden) == (3, 3, 0, 0)
    assert (row.unsettled, row.compared, row.anchored) == (1, 2, 0)
    assert row.exact == pytest.approx(1 / 2)  # k0 agrees, k1 does not
    # Six blind values: k0 1 1 (judge 1), k1 3 3 (judge 2), k2 3 2 (judge 3).
    assert (row.blind_entries, row.blind_compared, row.blind_agreeing) == (6, 6, 3)
    # A review given with the judge in view is not blind.
    Review.objects.filter(score__item__key="k2", user=bob).update(blind=False)
    [row] = agreement(task)
    assert (row.blind_entries, row.blind_agreeing) == (5, 3)  # bob's 2 on k2 disagreed


def test_the_page_follows_every_change_it_depends_on(reviewed, reviewer_user):
    """The page is memoised per process (`agreement.page`): a review that leaves no score
    event (the first of two wanted), a blind entry, an override, a revert, a reviewer's
    delete each give the numbers a fresh computation gives."""
    from apps.leaderboards import agreement as agreement_mod
    from apps.leaderboards import memo
    from apps.leaderboards.people import people_agreement

    task, run = reviewed["task"], reviewed["run"]

    def same() -> None:
        assert agreement_mod.page(task) == (agreement(task), people_agreement(task))

    same()
    ReviewPolicy.objects.create(task=task, reviews_per_item=2)
    carl, dan = make_user("reviewer", "carl"), make_user("reviewer", "dan")
    Review.submit(f.score(run, "k10", "accuracy"), carl, 1, "", 5)  # unsettled: no event
    same()
    assert agreement_mod.page(task)[0][0].by_reviews == 1
    BlindEntry.objects.create(score=f.score(run, "k10", "accuracy"), user=dan, value=3)
    same()
    f.score(run, "k2", "accuracy").override(1, reviewer_user, "no")
    same()
    f.score(run, "k2", "accuracy").revert(reviewer_user, "yes after all")
    same()
    carl.delete()  # their review goes with them
    same()
    assert agreement_mod.page(task)[0][0].by_reviews == 0
    memo.clear_all()
    same()
