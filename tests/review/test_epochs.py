"""Reviewing responses of several epochs: "flaky first" serves the items whose epochs disagree
before the rest, and the item page shows every epoch's response and round."""

import pytest
from django.test import Client
from django.urls import reverse

from apps.review.queue import Queue, orders_for
from tests.base import make_user
from tests.factories import (
    add_scores,
    make_generation_run,
    make_items,
    make_judge,
    make_judge_run,
    make_task,
)
from tests.review.test_queue import walk

SUBJECT = [{"name": "correct", "min": 0, "max": 100}]


@pytest.fixture
def epoch_run(db):
    task = make_task()
    dataset = make_items(task, 5)
    generation = make_generation_run(
        dataset, {f"k{i}": [f"answer {i}.{e} <b>bold</b>" for e in range(3)] for i in range(5)}
    )
    run = make_judge_run(dataset, make_judge(task, subjects=SUBJECT), source_run=generation)
    add_scores(
        run,
        {
            "k0": {"correct": [100, 100, 100]},
            "k1": {"correct": [100, 0, 100]},  # flaky
            "k2": {"correct": [0, 0, 0]},
            "k3": {"correct": [0, 100, 0]},  # flaky
            "k4": {"correct": [100, 100, 100]},
        },
    )
    return run


def test_flaky_first_serves_the_items_whose_epochs_disagree_first(epoch_run) -> None:
    alice = make_user("reviewer", "alice")
    assert "flaky" in orders_for(epoch_run)
    assert walk(Queue(epoch_run, alice, order="flaky")) == [1, 3, 0, 2, 4]


def test_flaky_first_is_offered_only_where_there_are_epochs(db) -> None:
    task = make_task()
    dataset = make_items(task, 2)
    run = make_judge_run(
        dataset, make_judge(task, subjects=SUBJECT), source_run=make_generation_run(dataset, {})
    )
    assert "flaky" not in orders_for(run)
    assert "flaky" in Queue.from_params(run, make_user("reviewer"), {"order": "flaky"}).order


def test_the_item_page_shows_every_epochs_response_escaped(epoch_run) -> None:
    client = Client()
    client.force_login(make_user("reviewer"))
    item = epoch_run.dataset.items.get(key="k1")
    html = client.get(reverse("review:item", args=[epoch_run.pk, item.pk])).content.decode()
    assert 'id="epoch-count"' in html and "3 epochs" in html
    for epoch in range(3):
        assert f'id="response-epoch-{epoch}"' in html
        assert f"answer 1.{epoch} &lt;b&gt;bold&lt;/b&gt;" in html
    assert "<b>bold</b>" not in html
    assert "epochs 100, 0, 100 (mean) · flaky: epochs differ by 100" in html
    listing = client.get(reverse("review:run", args=[epoch_run.pk])).content.decode()
    assert 'value="flaky"' in listing
