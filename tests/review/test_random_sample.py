"""The review policy's random sample (#31.1): "review a random N % of items", its seed
recorded, drawn the same by key in every version of a dataset, and served by its own queue
order in the order of the draws."""

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from apps.review.models import ReviewPolicy
from apps.review.queue import Queue, orders_for
from apps.review.sample import draws, sample_mask, sample_order, sample_size
from tests.base import make_user
from tests.factories import judge_item, make_item, make_judge_run, make_review_dataset, make_task


def test_sample_size_and_determinism():
    keys = [f"item-{i}" for i in range(1000)]
    chosen = sample_mask(keys, 10, 42)
    assert chosen.sum() == 100 == sample_size(1000, 10)
    assert sample_size(101, 10) == 11 and sample_size(7, 100) == 7 and sample_size(0, 50) == 0
    assert np.array_equal(chosen, sample_mask(keys, 10, 42))
    other = sample_mask(keys, 10, 43)
    assert other.sum() == 100 and (chosen & other).sum() < 40  # about 10 by chance
    # By key, not by position: the same items in a shuffled copy, and in one with more items.
    rng = np.random.default_rng(0)
    shuffled = [keys[i] for i in rng.permutation(1000)]
    again = dict(zip(shuffled, sample_mask(shuffled, 10, 42), strict=True))
    assert {k for k, v in again.items() if v} == {k for k, v in zip(keys, chosen, strict=True) if v}
    # The draws are uniform: about a tenth of 1000 below 0.1.
    assert 60 < (draws(keys, 1) < 0.1).sum() < 140
    order = sample_order(keys, 10, 42)
    assert sorted(order) == list(np.flatnonzero(chosen))
    values = draws(keys, 42)
    assert list(values[order]) == sorted(values[order])


@pytest.fixture
def judged(db):
    dataset = make_review_dataset(make_task())
    items = [make_item(dataset, i) for i in range(40)]
    run = make_judge_run(dataset)
    for item in items[:30]:  # ten items not judged yet: the queue cannot serve them
        judge_item(run, item, [{"accuracy": 3, "clarity": 4}] * 2)
    return run, items


def test_queue_serves_the_policy_sample_in_draw_order(judged):
    run, items = judged
    alice = make_user("reviewer", "alice")
    assert "random" not in orders_for(run)
    ReviewPolicy.objects.create(task=run.task, sample_percent=25, sample_seed=9)
    assert "random" in orders_for(run)
    queue = Queue(run, alice, order="random")
    assert "random 25 % of items (seed 9)" in queue.label
    keys = [item.key for item in items]
    expected = [items[i].position for i in sample_order(keys, 25, 9) if i < 30]
    served, current = [], None
    while (item := queue.claim_next(current)) is not None:
        served.append(item.position)
        current = item
    assert served == expected and len(expected) >= 5
    assert queue.position_of(items[expected[0]]) == (1, len(expected))


def test_the_policy_page_records_the_sample_and_its_seed(judged):
    run, _ = judged
    client = Client()
    client.force_login(make_user("admin"))
    url = reverse("review:policy", args=[run.task.slug])
    assert "Review a random N % of items" in client.get(url).content.decode()
    client.post(url, {"reviews_per_item": "1", "sample_percent": "10"})
    policy = ReviewPolicy.objects.get()
    assert policy.sample_percent == 10 and policy.sample_set_at is not None
    drawn, when = policy.sample_seed, policy.sample_set_at
    # Saved again unchanged: the same seed and time; a new seed is a new sample.
    client.post(url, {"reviews_per_item": "1", "sample_percent": "10", "sample_seed": str(drawn)})
    policy.refresh_from_db()
    assert (policy.sample_seed, policy.sample_set_at) == (drawn, when)
    client.post(url, {"reviews_per_item": "1", "sample_percent": "10", "sample_seed": "5"})
    policy.refresh_from_db()
    assert policy.sample_seed == 5 and policy.sample_set_at > when
    assert policy.sample_label == "random 10 % of items (seed 5)"
    bad = client.post(url, {"reviews_per_item": "1", "sample_percent": "0"})
    assert "greater than or equal to 1" in bad.content.decode()
    client.post(url, {"reviews_per_item": "1", "sample_percent": ""})
    policy.refresh_from_db()
    assert not policy.has_sample
