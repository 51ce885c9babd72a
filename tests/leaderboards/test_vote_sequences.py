"""People's A/B votes watched as they come in (#31.4): per pair of models, the anytime-valid
confidence sequence of +1 / −1 / 0 votes in the order cast, on the pairwise board."""

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from apps.judges.models import Judge, JudgeRun, PairwiseSetup
from apps.leaderboards import pairwise_board, sequential
from apps.review.models import Vote
from apps.runs.models import Run
from tests import factories as f
from tests.base import make_user


def test_votes_per_pair_are_the_sequence_of_their_signs() -> None:
    names = {1: "beta", 2: "alpha", 3: "gamma"}
    # Pair (1, 2) is shown as alpha vs beta: its votes count flipped.
    votes = [(1, 2, "b"), (2, 1, "a"), (1, 2, "tie"), (1, 3, "a"), (1, 2, "a")]
    found = pairwise_board.vote_sequences(votes, names, horizon=100)
    assert [(v.a, v.b, v.n) for v in found] == [("alpha", "beta", 4), ("beta", "gamma", 1)]
    expected = sequential.running(np.array([1.0, 1.0, 0.0, -1.0]), 100)
    assert found[0].mean == pytest.approx(0.25)
    assert (found[0].low, found[0].high) == (
        pytest.approx(expected.low[-1]),
        pytest.approx(expected.high[-1]),
    )
    assert found[0].state == sequential.GOING  # never before MIN_ITEMS votes


@pytest.fixture
def voted(db):
    """A pairwise run over "left" and "right" on 40 items; people's votes: "left" wins every
    vote on pair (left, right) and the pair (left, mid) splits evenly."""
    task = f.make_task("ab")
    dataset = f.make_qa_dataset(task, 40)
    runs = [
        f.make_generation_run(dataset, {i: f"{name} {i}" for i in range(40)}, label=name)
        for name in ("left", "right", "mid")
    ]
    judge = f.make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    run = JudgeRun.create_with(
        judge, task=task, kind=Run.Kind.PAIRWISE, dataset=dataset, status=Run.Status.COMPLETED
    )
    PairwiseSetup.objects.create(run=run).responses.set(runs)
    left, right, mid = runs
    people = [make_user("reviewer", f"r{k}") for k in range(2)]
    rows = []
    for i, item in enumerate(dataset.items.order_by("position")):
        for person in people:
            rows.append(
                Vote(
                    run=run,
                    item=item,
                    a_run=left,
                    b_run=right,
                    user=person,
                    a_on_left=True,
                    choice="a",
                )
            )
            rows.append(
                Vote(
                    run=run,
                    item=item,
                    a_run=left,
                    b_run=mid,
                    user=person,
                    a_on_left=True,
                    choice="a" if (i + people.index(person)) % 2 else "b",
                )
            )
    Vote.objects.bulk_create(rows)
    return task, judge


def test_the_pairwise_board_says_which_pair_may_stop(voted) -> None:
    task, judge = voted
    board = pairwise_board.build(task, judge.pk, source="human")
    by_pair = {(v.a, v.b): v for v in board.vote_sequences}
    decided, split = by_pair["left", "right"], by_pair["left", "mid"]
    assert (decided.n, decided.state, decided.decided_at) == (80, sequential.BETTER, 30)
    assert decided.label == "decided: left better"
    assert (split.n, split.mean, split.state) == (80, 0.0, sequential.GOING)
    assert split.low < 0 < split.high

    client = Client()
    client.force_login(make_user("viewer", "watcher"))
    html = client.get(reverse("leaderboards:pairwise", args=[task.slug])).content.decode()
    assert 'id="vote-sequence-table"' in html
    assert 'data-pair="left vs right"' in html and "decided: left better" in html
