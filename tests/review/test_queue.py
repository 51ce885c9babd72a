"""The review queue: each "next item" order, unreviewed-only, the stratified sample,
assignments, and the short lock that keeps two reviewers off the same item."""

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import close_old_connections
from django.db.models import F
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.judges.models import Score
from apps.review.models import ReviewAssignment, ReviewLock
from apps.review.queue import Queue, first_tag, stratified_sample
from apps.runs.models import Run
from tests.base import make_user
from tests.factories import (
    fail_item,
    judge_item,
    make_item,
    make_judge_run,
    make_review_dataset,
    make_task,
)


@pytest.fixture
def alice(db):
    return make_user("reviewer", "alice")


@pytest.fixture
def bob(db):
    return make_user("reviewer", "bob")


@pytest.fixture
def mixed(db):
    """Six items built so that every order gives a different, known sequence (positions)."""
    dataset = make_review_dataset(make_task())
    items = [make_item(dataset, i) for i in range(7)]
    run = make_judge_run(dataset)
    judge_item(run, items[0], [{"accuracy": 3, "clarity": 3}] * 2)  # at the midpoint
    fail_item(run, items[1])  # every round failed
    judge_item(run, items[2], [{"accuracy": 1, "clarity": 3}, {"accuracy": 5, "clarity": 3}])
    judge_item(run, items[3], [{"accuracy": 2, "clarity": 5}, {"accuracy": 3, "clarity": 5}])
    judge_item(run, items[4], [{"accuracy": 5, "clarity": 4}] * 2)
    judge_item(run, items[5], [{"accuracy": 4, "clarity": 4}, None])  # one round failed
    # items[6] is not judged yet: no queue serves it.
    return run, items


def walk(queue: Queue) -> list[int]:
    """Positions in the order the queue serves them, claiming each like a reviewer does."""
    seen, current = [], None
    while (item := queue.claim_next(current)) is not None:
        assert item.position not in seen, "served twice"
        seen.append(item.position)
        current = item
    return seen


def test_file_order(mixed, alice):
    run, _ = mixed
    assert walk(Queue(run, alice)) == [0, 1, 2, 3, 4, 5]


def test_failed_first(mixed, alice):
    run, _ = mixed
    assert walk(Queue(run, alice, order="failed")) == [1, 5, 0, 2, 3, 4]


def test_uncertainty_first_then_nearest_the_midpoint(mixed, alice):
    """Spread 4 (item 2), spread 1 (item 3), then distance to 3: 0 (item 0), 1 (4 and 5, by
    position), and the failed item, which has no value to be near anything, last."""
    run, _ = mixed
    assert walk(Queue(run, alice, order="uncertain")) == [2, 3, 0, 4, 5, 1]


def test_uncertainty_first_with_a_chosen_threshold(mixed, alice):
    run, _ = mixed
    assert walk(Queue(run, alice, order="uncertain", threshold=5)) == [2, 3, 4, 5, 0, 1]


def test_disagreement_is_compared_as_a_share_of_each_subjects_range(db, alice):
    dataset = make_review_dataset(make_task())
    items = [make_item(dataset, i) for i in range(2)]
    from tests.factories import make_judge

    judge = make_judge(
        dataset.task,
        subjects=[
            {"name": "accuracy", "min": 1, "max": 5},
            {"name": "score", "min": 0, "max": 100},
        ],
    )
    run = make_judge_run(dataset, judge=judge)
    # 10 points of 100 is less disagreement than 2 points of 4.
    judge_item(run, items[0], [{"accuracy": 3, "score": 40}, {"accuracy": 3, "score": 50}])
    judge_item(run, items[1], [{"accuracy": 2, "score": 50}, {"accuracy": 4, "score": 50}])
    assert walk(Queue(run, alice, order="uncertain")) == [1, 0]


def test_unreviewed_only(mixed, alice, bob):
    run, items = mixed
    Score.objects.filter(run=run, item=items[0]).bulk_confirm(bob)
    Score.objects.get(run=run, item=items[3], subject="accuracy").override(1, bob, "x", 0)
    # Item 3 still has an unreviewed subject, so it stays in the queue.
    assert walk(Queue(run, alice, order="unreviewed")) == [1, 2, 3, 4, 5]
    ReviewLock.objects.all().delete()
    assert walk(Queue(run, alice, order="failed", unreviewed=True)) == [1, 5, 2, 3, 4]


def test_previous_goes_back_even_to_reviewed_items(mixed, alice):
    run, _items = mixed
    queue = Queue(run, alice, order="unreviewed")
    first = queue.claim_next(None)
    Score.objects.filter(run=run, item=first).bulk_confirm(alice)
    second = queue.claim_next(first)
    assert second.position == 1
    assert queue.claim_next(second, forward=False) == first
    assert queue.claim_next(first, forward=False) is None


# ---- the sample ----------------------------------------------------------------------------
def test_stratified_sample_is_proportional_and_reproducible():
    rows = [(i, "a") for i in range(50)] + [(100 + i, "b") for i in range(30)]
    rows += [(200 + i, "") for i in range(20)]
    sample = stratified_sample(rows, 10, seed=7)
    strata = Counter("a" if pk < 100 else "b" if pk < 200 else "" for pk in sample)
    assert strata == {"a": 5, "b": 3, "": 2} and len(set(sample)) == 10
    assert stratified_sample(rows, 10, seed=7) == sample
    assert stratified_sample(list(rows), 10, seed=8) != sample


def test_stratified_sample_rounds_by_largest_remainder():
    rows = [(i, "a") for i in range(5)] + [(10 + i, "b") for i in range(3)] + [(20, "c")]
    # 4 of 9: exact shares a 2.22, b 1.33, c 0.44 → 2, 1, and the one left goes to c.
    strata = Counter(pk // 10 for pk in stratified_sample(rows, 4, seed=1))
    assert strata == {0: 2, 1: 1, 2: 1}


def test_stratified_sample_edges():
    rows = [(1, "a"), (2, "b")]
    assert sorted(stratified_sample(rows, 50, seed=0)) == [1, 2]
    assert stratified_sample(rows, 0, seed=0) == [] and stratified_sample([], 5, seed=0) == []


def test_first_tag_is_the_stratum():
    assert first_tag("|math|easy|") == "math" and first_tag("") == ""


@pytest.fixture
def tagged(db):
    dataset = make_review_dataset(make_task())
    run = make_judge_run(dataset)
    for i in range(40):
        tag = "math" if i < 20 else "code" if i < 32 else "prose"
        judge_item(run, make_item(dataset, i, tags=[tag, "extra"]), [{"accuracy": 3, "clarity": 3}])
    return run


def test_sample_queue_serves_exactly_the_seeded_sample(tagged, alice):
    queue = Queue(tagged, alice, order="sample", n=10, seed=42)
    served = walk(queue)
    assert len(served) == 10
    tags = Counter("math" if p < 20 else "code" if p < 32 else "prose" for p in served)
    assert tags == {"math": 5, "code": 3, "prose": 2}
    ReviewLock.objects.all().delete()
    assert walk(Queue(tagged, alice, order="sample", n=10, seed=42)) == served
    ReviewLock.objects.all().delete()
    assert walk(Queue(tagged, alice, order="sample", n=10, seed=43)) != served
    position = Queue(tagged, alice, order="sample", n=10, seed=42).position_of(
        tagged.dataset.items.get(position=served[2])
    )
    assert position == (3, 10)


def test_sample_queue_through_the_views_keeps_n_and_seed(tagged, alice):
    client = Client()
    client.force_login(alice)
    url = reverse("review:claim", args=[tagged.pk])
    response = client.post(url, {"order": "sample", "n": "5", "seed": "9"})
    assert response.status_code == 302
    assert "order=sample" in response["Location"] and "n=5" in response["Location"]
    assert "seed=9" in response["Location"]
    expected = [
        tagged.dataset.items.get(pk=pk).position
        for pk in Queue(tagged, alice, order="sample", n=5, seed=9).ordered_ids
    ]
    served, after = [], None
    while True:
        data = {"order": "sample", "n": "5", "seed": "9", **({"after": after} if after else {})}
        response = client.post(url, data)
        if "/item/" not in response["Location"]:
            break
        item_id = int(response["Location"].split("/item/")[1].split("/")[0])
        if item_id == after:
            break  # the queue is done: back to the last item
        served.append(tagged.dataset.items.get(pk=item_id).position)
        after = item_id
    assert served == expected


def test_the_sample_is_the_same_whoever_asks(tagged, alice, bob):
    mine = Queue(tagged, alice, order="sample", n=8, seed=3).ordered_ids
    ReviewAssignment.assign(tagged, mine[:2], bob, by=None)
    assert Queue(tagged, bob, order="sample", n=8, seed=3, mine=True).ordered_ids == mine
    assert walk(Queue(tagged, bob, order="sample", n=8, seed=3, mine=True)) == [
        tagged.dataset.items.get(pk=pk).position for pk in mine[:2]
    ]


def test_a_cached_order_is_computed_afresh_when_the_judge_writes_new_results(mixed, alice):
    run, items = mixed
    assert Queue(run, alice, order="uncertain").ordered_ids[0] == items[2].pk
    # A retry re-judges item 0 with wildly different rounds; the run's progress moves.
    Score.objects.filter(run=run, item=items[0], subject="accuracy").update(spread=4.0)
    Score.objects.filter(run=run, item=items[2]).update(spread=0.0)
    Run.objects.filter(pk=run.pk).update(launch=F("launch") + 1)
    run.refresh_from_db()
    assert Queue(run, alice, order="uncertain").ordered_ids[0] == items[0].pk


# ---- assignments -------------------------------------------------------------------------
def test_assigned_items_go_to_their_reviewer_only(mixed, alice, bob):
    run, items = mixed
    ReviewAssignment.assign(run, [items[0].pk, items[2].pk], bob, by=None)
    assert walk(Queue(run, alice)) == [1, 3, 4, 5]
    assert walk(Queue(run, bob, mine=True)) == [0, 2]


# ---- locks -------------------------------------------------------------------------------
def test_two_reviewers_are_served_different_items(mixed, alice, bob):
    run, _ = mixed
    first = Queue(run, alice, order="failed").claim_next(None)
    second = Queue(run, bob, order="failed").claim_next(None)
    assert (first.position, second.position) == (1, 5)
    assert ReviewLock.holder(run, first).user == alice
    assert ReviewLock.holder(run, second).user == bob


def test_two_reviewers_through_the_views_get_different_items(mixed, alice, bob):
    run, _ = mixed
    locations = []
    for user in (alice, bob):
        client = Client()
        client.force_login(user)
        response = client.post(reverse("review:claim", args=[run.pk]), {"order": "uncertain"})
        locations.append(response["Location"].split("?")[0])
    assert locations[0] != locations[1]


def test_moving_on_frees_the_last_item(mixed, alice, bob):
    run, _ = mixed
    queue = Queue(run, alice)
    first = queue.claim_next(None)
    queue.claim_next(first)
    assert ReviewLock.objects.filter(user=alice).count() == 1
    assert Queue(run, bob).claim_next(None) == first


def test_an_expired_lock_no_longer_holds_the_item(mixed, alice, bob):
    run, _ = mixed
    item = Queue(run, alice).claim_next(None)
    lock = ReviewLock.objects.get(user=alice)
    assert timedelta(minutes=4) < lock.expires_at - timezone.now() <= timedelta(minutes=5)
    assert Queue(run, bob).claim_next(None) != item
    ReviewLock.objects.filter(user=bob).delete()
    ReviewLock.objects.filter(pk=lock.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert lock.__class__.objects.get(pk=lock.pk).is_expired
    assert Queue(run, bob).claim_next(None) == item
    assert ReviewLock.holder(run, item).user == bob


def test_the_open_page_renews_the_lock(mixed, alice):
    run, items = mixed
    client = Client()
    client.force_login(alice)
    ReviewLock.objects.create(
        run=run, item=items[0], user=alice, expires_at=timezone.now() + timedelta(seconds=10)
    )
    response = client.post(
        reverse("review:lock", args=[run.pk, items[0].pk]), HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert "You hold this item" in html and 'hx-trigger="every 60s"' in html
    assert ReviewLock.objects.get().expires_at > timezone.now() + timedelta(minutes=4)


def test_opening_an_item_page_claims_it_and_frees_the_last_one(mixed, alice):
    run, items = mixed
    ReviewLock.claim(run, items[0], alice)
    client = Client()
    client.force_login(alice)
    html = client.get(reverse("review:item", args=[run.pk, items[2].pk])).content.decode()
    assert 'hx-trigger="load, every 60s"' in html and "opened" in html
    client.post(
        reverse("review:lock", args=[run.pk, items[2].pk]), {"opened": "1"}, HTTP_HX_REQUEST="true"
    )
    assert list(ReviewLock.objects.values_list("item__position", flat=True)) == [2]


def test_a_page_held_by_someone_else_says_so_and_does_not_take_it(mixed, alice, bob):
    run, items = mixed
    ReviewLock.claim(run, items[0], bob)
    client = Client()
    client.force_login(alice)
    html = client.get(reverse("review:item", args=[run.pk, items[0].pk])).content.decode()
    assert "bob is reviewing this item" in html
    client.post(reverse("review:lock", args=[run.pk, items[0].pk]))
    assert ReviewLock.holder(run, items[0]).user == bob


@pytest.mark.django_db(transaction=True)
def test_claiming_the_same_item_at_once_lets_exactly_one_reviewer_win():
    dataset = make_review_dataset(make_task())
    item = make_item(dataset, 0)
    run = make_judge_run(dataset)
    users = [make_user("reviewer", f"r{i}") for i in range(4)]
    barrier = threading.Barrier(len(users))
    results: list[bool] = []

    def claim(user):
        try:
            barrier.wait(timeout=10)
            results.append(ReviewLock.claim(run, item, user))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=claim, args=(u,)) for u in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [False, False, False, True]
    assert ReviewLock.objects.count() == 1


def test_a_finished_queue_says_so(mixed, alice):
    run, items = mixed
    client = Client()
    client.force_login(alice)
    response = client.post(
        reverse("review:claim", args=[run.pk]),
        {"order": "position", "after": items[5].pk},
        follow=True,
    )
    assert "No more items in this queue" in response.content.decode()
