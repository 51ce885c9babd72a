"""One item filter for a judge run's items: the results page and the review list mean the same
by failed, ok and pending, because both ask RunItemQuerySet."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from apps.judges.models import RunItemQuerySet
from tests.base import make_user
from tests.factories import fail_item, judge_item, make_item, scenario

pytestmark = pytest.mark.django_db


@pytest.fixture
def states():
    """Items 0-1 judged ok (overridden: 1), 2 failed, 3 half failed (one round), 4 not judged."""
    run, items = scenario(2)
    items += [make_item(run.dataset, i) for i in (2, 3, 4)]
    fail_item(run, items[2])
    judge_item(run, items[3], [{"accuracy": 2, "clarity": 5}, None])
    reviewer = make_user("reviewer")
    for score in run.scores.filter(item=items[1]):
        score.override(5, reviewer, "clearly right")
    return run, items


def positions(items: RunItemQuerySet) -> list[int]:
    return list(items.order_by("position").values_list("position", flat=True))


def test_each_state_has_one_meaning(states) -> None:
    run, _ = states
    items = RunItemQuerySet.of(run)
    assert positions(items.judged()) == [0, 1, 2, 3]
    assert positions(items.pending()) == [4]
    assert positions(items.failed()) == [2, 3]  # a failed round counts, not only a failed score
    assert positions(items.ok()) == [0, 1]
    assert positions(items.overridden()) == [1]
    assert positions(items.unreviewed()) == [0, 2, 3]
    assert positions(items.reviewed()) == [1]
    assert positions(items.scored_between("clarity", 4.5, None)) == [1, 3]  # final values
    assert positions(items.scored_between("clarity", None, 3)) == [0]
    assert positions(items.disagreeing()) == []
    # The run is carried through every chained filter, and nothing leaks between runs.
    assert positions(items.filter(position__gt=0).failed().tagged("")) == [2, 3]
    other, _ = scenario(3)
    assert positions(RunItemQuerySet.of(other).failed()) == []


@pytest.mark.parametrize("state", ["failed", "ok", "pending"])
def test_results_page_and_review_list_list_the_same_items(states, state: str) -> None:
    run, _ = states
    client = Client()
    client.force_login(make_user("admin"))
    results = client.get(reverse("judges:results", args=[run.pk]), {"status": state}).text
    review = client.get(reverse("review:run", args=[run.pk]), {"status": state}).text
    shown_in_results = re.findall(r'<tr data-item="\d+"[^>]*><td>(\d+)</td>', results)
    shown_in_review = re.findall(r'<tr data-item="\d+">.*?<td>(\d+)</td>', review, re.S)
    # Both pages number rows from 1 (the position + 1).
    expected = [str(p + 1) for p in positions(RunItemQuerySet.of(run).in_state(state))]
    assert shown_in_results == expected and shown_in_review == expected
    if state == "failed":
        assert results.count("badge badge-bad") == 2  # the half-failed item is marked too


def test_the_results_summary_follows_an_override(states) -> None:
    """The per-subject summary is cached by the run's results and the last score event: an
    override after a first look shows at once, as a computation without the cache gives."""
    from apps.judges import results

    run, items = states
    before = {r.name: r for r in results.subject_results(run)}
    assert before["accuracy"].overridden == 1
    run.scores.get(item=items[0], subject="accuracy").override(1, make_user("admin"), "no")
    after = results.subject_results(run)
    assert {r.name: r.overridden for r in after}["accuracy"] == 2
    assert repr(after) == repr(results._subject_results(run))
