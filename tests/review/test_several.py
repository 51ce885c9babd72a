"""Several reviewers per item (#12): independent reviews, consensus, adjudication, the queue's
claims, what a reviewer may see before submitting, and who may change what."""

import re

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from apps.judges.models import Judge, Score, ScoreEvent
from apps.review.models import Adjudication, Review, ReviewClaim, ReviewPolicy
from apps.review.queue import Queue
from tests.base import make_user
from tests.factories import (
    judge_item,
    make_item,
    make_judge,
    make_judge_run,
    make_review_dataset,
    make_task,
)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def people(db):
    return {name: make_user("reviewer", name) for name in ("alice", "bob", "carol", "dave")} | {
        "root": make_user("admin", "root"),
        "val": make_user("viewer", "val"),
    }


@pytest.fixture
def several(db):
    """Three items judged 4 (accuracy) and 3 (clarity) on 1–5; three reviews per item."""
    task = make_task()
    dataset = make_review_dataset(task)
    items = [make_item(dataset, i) for i in range(3)]
    run = make_judge_run(dataset)
    for item in items:
        judge_item(run, item, [{"accuracy": 4, "clarity": 3}])
    ReviewPolicy.objects.create(task=task, reviews_per_item=3, thresholds={"accuracy": 1})
    return run, items


def score_of(run, item, subject: str = "accuracy") -> Score:
    return Score.objects.get(run=run, item=item, subject=subject)


def test_agreeing_reviews_settle_on_their_mean(several, people) -> None:
    run, items = several
    score = score_of(run, items[0])
    for name, value in (("alice", 4), ("bob", 4)):
        Review.submit(score, people[name], value, f"{name} says", 12)
        score.refresh_from_db()
        assert score.final_value == 4 and not score.events.exists()  # not yet: 2 of 3
    Review.submit(score, people["carol"], 5, "carol says", 30)
    score.refresh_from_db()
    assert score.final_value == pytest.approx(13 / 3) and score.override_by is None
    event = score.events.get()
    assert event.kind == ScoreEvent.Kind.CONSENSUS and event.user is None
    assert "alice 4, bob 4, carol 5" in event.reason
    assert not Adjudication.objects.exists()


def test_agreement_with_the_judge_reads_as_a_confirmation(several, people) -> None:
    run, items = several
    score = score_of(run, items[0], "clarity")  # 0 threshold: must agree exactly
    for name in ("alice", "bob", "carol"):
        Review.submit(score, people[name], 3, "", 5)
    score.refresh_from_db()
    assert (score.final_value, score.is_overridden, score.confirmed_at is not None) == (
        3,
        False,
        True,
    )


def test_disagreement_beyond_the_threshold_waits_for_an_adjudicator(several, people) -> None:
    run, items = several
    score = score_of(run, items[1])
    for name, value in (("alice", 2), ("bob", 4), ("carol", 4)):  # spread 2 > 1
        Review.submit(score, people[name], value, f"{name}'s reason", 10)
    score.refresh_from_db()
    assert score.final_value == 4 and not score.is_reviewed  # still the judge's
    adjudication = Adjudication.objects.get(score=score)
    assert adjudication.is_open and adjudication.spread == 2
    with pytest.raises(PermissionDenied):
        adjudication.decide(3, people["dave"], "a reviewer may not")
    with pytest.raises(ValidationError):
        adjudication.decide(3, people["root"], "")
    adjudication.decide(3, people["root"], "bob and carol missed the unit")
    score.refresh_from_db()
    assert (score.final_value, score.override_by, adjudication.is_open) == (
        3,
        people["root"],
        False,
    )
    assert score.events.get().kind == ScoreEvent.Kind.ADJUDICATE
    # A named adjudicator may too.
    policy = ReviewPolicy.objects.get()
    policy.adjudicator = people["dave"]
    policy.save()
    other = score_of(run, items[2])
    for name, value in (("alice", 1), ("bob", 5), ("carol", 5)):
        Review.submit(other, people[name], value, "", 1)
    Adjudication.objects.get(score=other).decide(5, people["dave"], "alice misread")
    assert score_of(run, items[2]).final_value == 5


def test_a_review_is_given_once_and_inside_the_range(several, people) -> None:
    run, items = several
    score = score_of(run, items[0])
    Review.submit(score, people["alice"], 4, "", 3)
    with pytest.raises(ValidationError, match="reviewed this already"):
        Review.submit(score, people["alice"], 5, "", 3)
    with pytest.raises(ValidationError, match="outside accuracy's range"):
        Review.submit(score, people["bob"], 9, "", 3)
    assert Review.objects.count() == 1


def test_majority_on_a_right_or_wrong_subject(db, people) -> None:
    task = make_task()
    dataset = make_review_dataset(task)
    item = make_item(dataset, 0)
    judge = make_judge(task, Judge.Kind.MCQ_RULE)
    run = make_judge_run(dataset, judge)
    judge_item(run, item, [{"score": 0}])
    ReviewPolicy.objects.create(task=task, reviews_per_item=3, thresholds={"score": 100})
    score = score_of(run, item, "score")
    for name, value in (("alice", 100), ("bob", 100), ("carol", 0)):
        Review.submit(score, people[name], value, "", 1)
    score.refresh_from_db()
    assert score.final_value == 100


def test_the_queue_serves_an_item_until_its_reviews_and_claims_fill_the_target(
    several, people
) -> None:
    run, items = several
    ReviewPolicy.objects.filter().update(reviews_per_item=2)

    def next_for(name: str):
        return Queue(run, people[name]).claim_next(None)

    assert next_for("alice") == items[0]
    assert next_for("bob") == items[0]  # a second reviewer wanted
    assert next_for("carol") == items[1]  # two claims on item 0 fill it
    assert ReviewClaim.objects.filter(item=items[0]).count() == 2
    for subject in ("accuracy", "clarity"):
        Review.submit(score_of(run, items[0], subject), people["alice"], 4, "", 1)
    # The queue never serves alice what she reviewed; her claim stays until she moves on.
    assert Queue(run, people["alice"]).claim_next(None) == items[1]
    assert not ReviewClaim.objects.filter(item=items[0], user=people["alice"]).exists()
    assert next_for("dave") == items[2]  # item 0: alice reviewed, bob claims; item 1: carol, alice


def test_before_submitting_a_reviewer_sees_no_one_elses_value(several, people) -> None:
    run, items = several
    Review.submit(score_of(run, items[0]), people["alice"], 2, "ALICE-SECRET reason", 9)
    bob = client_for(people["bob"])
    url = reverse("review:item", args=[run.pk, items[0].pk])
    html = bob.get(url, {"blind": "1"}).content.decode()
    assert "ALICE-SECRET" not in html and 'class="judge-value"' not in html
    assert "hidden until you submit" in html and "1 of 3 reviews" in html
    score = score_of(run, items[0])
    answer = bob.post(
        reverse("review:submit", args=[score.pk]),
        {"value": "4", "reason": "bob's view", "shown_at": "0", "blind": "1"},
        HTTP_HX_REQUEST="true",
    )
    card = answer.content.decode()
    assert answer.status_code == 200 and "ALICE-SECRET reason" in card and "bob&#x27;s view" in card
    assert 'class="judge-value"' in card
    # A viewer does not review: they see the reviews.
    assert "ALICE-SECRET" in client_for(people["val"]).get(url).content.decode()


def test_a_reviewer_cannot_override_directly_but_an_admin_can(several, people) -> None:
    run, items = several
    score = score_of(run, items[0])
    form = {"value": "2", "reason": "mine", "revision": score.revision}
    refused = client_for(people["alice"]).post(reverse("review:override", args=[score.pk]), form)
    assert refused.status_code == 403 and score_of(run, items[0]).final_value == 4
    done = client_for(people["root"]).post(reverse("review:override", args=[score.pk]), form)
    assert done.status_code == 302 and score_of(run, items[0]).final_value == 2


def test_the_policy_page_is_for_admins(several, people) -> None:
    run, _ = several
    url = reverse("review:policy", args=[run.task.slug])
    assert client_for(people["alice"]).get(url).status_code == 403
    admin = client_for(people["root"])
    bad = admin.post(url, {"reviews_per_item": "2", "thresholds": "accuracy=-1"})
    assert "the number 0 or more" in bad.content.decode()
    admin.post(
        url,
        {
            "reviews_per_item": "2",
            "thresholds": "accuracy=1.5, clarity=0",
            "adjudicator": people["dave"].pk,
        },
    )
    policy = ReviewPolicy.objects.get()
    assert (policy.reviews_per_item, policy.thresholds, policy.adjudicator) == (
        2,
        {"accuracy": 1.5, "clarity": 0.0},
        people["dave"],
    )


def test_the_adjudication_page_lists_open_ones_with_every_review(several, people) -> None:
    run, items = several
    score = score_of(run, items[1])
    for name, value in (("alice", 1), ("bob", 4), ("carol", 5)):
        Review.submit(score, people[name], value, f"<i>{name}</i>", 10)
    url = reverse("review:adjudication", args=[run.task.slug])
    html = client_for(people["bob"]).get(url).content.decode()
    assert "&lt;i&gt;alice&lt;/i&gt;" in html and "adjudicate-form" not in html
    admin = client_for(people["root"])
    assert "adjudicate-form" in admin.get(url).content.decode()
    adjudication = Adjudication.objects.get()
    admin.post(
        reverse("review:adjudicate", args=[adjudication.pk]),
        {"value": "4", "reason": "most said so", "next": "list"},
    )
    assert score_of(run, items[1]).final_value == 4
    assert 'id="no-adjudications"' in admin.get(url).content.decode()


def test_a_score_with_all_its_reviews_is_shown_to_others_without_a_form(several, people) -> None:
    run, items = several
    for subject in ("accuracy", "clarity"):
        for name in ("alice", "bob", "carol"):
            Review.submit(score_of(run, items[0], subject), people[name], 4, f"{name} OK", 3)
    html = (
        client_for(people["dave"])
        .get(reverse("review:item", args=[run.pk, items[0].pk]), {"blind": "1"})
        .content.decode()
    )
    assert "review-form" not in html and "This score has its 3 reviews." in html
    assert "carol OK" in html and 'class="judge-value"' in html
    # The history counts what it lists: 3 reviews and the consensus event, per subject.
    listed = html.count('class="event event-review"') + html.count('class="event event-consensus"')
    assert listed == 8 and html.count("<summary>History (4)</summary>") == 2


def test_the_run_page_shows_progress_overall_and_per_reviewer(several, people) -> None:
    run, items = several
    for subject in ("accuracy", "clarity"):
        for name in ("alice", "bob", "carol"):
            Review.submit(score_of(run, items[0], subject), people[name], 4, "", 3)
    Review.submit(score_of(run, items[1]), people["alice"], 1, "", 3)
    html = client_for(people["val"]).get(reverse("review:run", args=[run.pk])).content.decode()
    assert '<strong class="count-complete">1</strong> of 3 items' in html
    assert (
        'data-reviewer="alice"><td>alice</td><td class="num">2</td><td class="num">3</td>' in html
    )
    item_page = client_for(people["val"]).get(reverse("review:item", args=[run.pk, items[0].pk]))
    assert item_page.content.decode().count('class="event event-review"') == 6


def test_a_reviewer_cannot_bulk_confirm_when_items_take_several_reviews(several, people) -> None:
    run, items = several
    form = {"action": "confirm", "item": [items[0].pk]}
    refused = client_for(people["alice"]).post(reverse("review:bulk", args=[run.pk]), form)
    assert refused.status_code == 403
    assert not Score.objects.filter(run=run, confirmed_at__isnull=False).exists()
    client_for(people["root"]).post(reverse("review:bulk", args=[run.pk]), form)
    assert Score.objects.filter(run=run, confirmed_at__isnull=False).count() == 2


def test_a_claim_of_someone_halfway_through_is_not_counted_twice(several, people) -> None:
    """Alice has reviewed one subject of item 0 and still holds it; bob has reviewed it all.
    Two people, one place left: carol must be served it (counting alice's review and her
    claim both once filled the item with two people, and left it short for good)."""
    run, items = several
    assert Queue(run, people["alice"]).claim_next(None) == items[0]
    Review.submit(score_of(run, items[0], "accuracy"), people["alice"], 4, "", 1)
    assert Queue(run, people["bob"]).claim_next(None) == items[0]
    for subject in ("accuracy", "clarity"):
        Review.submit(score_of(run, items[0], subject), people["bob"], 4, "", 1)
    ReviewClaim.release(run, items[0], people["bob"])
    assert Queue(run, people["carol"]).claim_next(None) == items[0]
    assert Queue(run, people["dave"]).claim_next(None) == items[1]  # now it is full


def test_lowering_the_target_settles_what_now_has_its_reviews(several, people) -> None:
    run, items = several
    score = score_of(run, items[0])
    for name in ("alice", "bob"):
        Review.submit(score, people[name], 5, "", 1)
    assert not score_of(run, items[0]).is_reviewed  # 2 of 3
    admin = client_for(people["root"])
    answer = admin.post(
        reverse("review:policy", args=[run.task.slug]),
        {"reviews_per_item": "2", "thresholds": "accuracy=1"},
        follow=True,
    )
    assert "1 waiting score settled." in answer.content.decode()
    assert score_of(run, items[0]).final_value == 5


def test_rows_are_counted_from_one_wherever_people_read_them(several, people) -> None:
    """Items showed their 0-based position as their row (#28.6); upload errors count rows
    from 1, and so do the pages now."""
    run, items = several
    first = items[0]
    assert first.position == 0
    client = client_for(people["root"])
    dataset_page = client.get(first.dataset.get_absolute_url()).content.decode()
    assert re.search(
        r'<td class="num">1</td><td><a href="[^"]+">' + re.escape(first.key), dataset_page
    )
    item_page = client.get(
        reverse("datasets:item-detail", args=[first.dataset_id, first.position])
    ).content.decode()
    assert "row 1 of" in item_page
    review_list = client.get(reverse("review:run", args=[run.pk])).content.decode()
    assert re.search(r"<td>1</td>\s*<td><a [^>]+>" + re.escape(first.key), review_list)
    review_item = client.get(reverse("review:item", args=[run.pk, first.pk])).content.decode()
    assert '<span class="muted">row 1</span>' in review_item
