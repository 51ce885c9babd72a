"""Active sampling on the board (#31.2): the policy's active design draws items with recorded
probabilities, likelier where the judge is unsure; the queue serves them in draw / probability
order; the corrected board weights each review by its probability (reviews made out of that
order wait until the ones before them are made); the reviews a target width needs."""

import csv
import io
import json

import numpy as np
import pytest
from django.urls import reverse

from apps.accounts.models import ApiToken
from apps.datasets.models import Item
from apps.judges.models import Score
from apps.leaderboards import boards, corrected
from apps.leaderboards.active import active_mean
from apps.review.models import ReviewPolicy, SampleInclusion
from apps.review.queue import Queue
from apps.review.sample import active_sample, draws
from tests import factories as f
from tests.base import make_user

SIZE = 80
PERCENT, SEED = 25, 11


@pytest.fixture
def active(db):
    """One model on 80 items, judged 1–5: the judge is unsure (3, mid-scale) of every fourth
    item and sure (1 or 5) of the rest; people's values differ from the judge's on the
    unsure ones."""
    task = f.make_task("act")
    dataset = f.make_items(task, SIZE)
    judge = f.make_judge(task, name="grader", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    generation = f.make_generation_run(
        dataset, {f"k{i}": f"answer {i}" for i in range(SIZE)}, label="model"
    )
    run = f.make_judge_run(dataset, judge, source_run=generation)
    judged = np.array([3.0 if i % 4 == 0 else (5.0 if i % 2 else 1.0) for i in range(SIZE)])
    people = np.where(judged == 3.0, np.where(np.arange(SIZE) % 8 == 0, 5.0, 1.0), judged)
    f.add_scores(run, {f"k{i}": {"accuracy": judged[i]} for i in range(SIZE)})
    policy = ReviewPolicy.objects.create(
        task=task,
        sample_percent=PERCENT,
        sample_seed=SEED,
        sample_design=ReviewPolicy.Design.ACTIVE,
    )
    return {
        "task": task,
        "dataset": dataset,
        "run": run,
        "policy": policy,
        "judged": judged,
        "people": people,
    }


def test_probabilities_recorded_follow_the_judges_doubt_and_stay(active):
    drawn = active_sample(active["policy"], active["dataset"])
    ids = list(
        Item.objects.filter(dataset=active["dataset"])
        .order_by("position")
        .values_list("pk", flat=True)
    )
    probability = np.array([drawn.probability[pk] for pk in ids])
    assert probability.mean() == pytest.approx(PERCENT / 100)
    unsure = active["judged"] == 3.0
    # Uncertainty 1 on the unsure items, 0 elsewhere; with the 20 % uniform share the
    # probabilities are 0.25 × (0.8 × 4 + 0.2) = 0.85 and 0.25 × 0.2 = 0.05.
    assert probability[unsure] == pytest.approx(0.85)
    assert probability[~unsure] == pytest.approx(0.05)
    # The draws are the sample's hashed draws: in the sample when draw < probability.
    expected = draws([f"k{i}" for i in range(SIZE)], SEED)
    assert [drawn.draw[pk] for pk in ids] == pytest.approx(list(expected))
    assert set(drawn.order()) == {pk for i, pk in enumerate(ids) if expected[i] < probability[i]}
    # Recorded: the judge changing its mind later does not move them.
    Score.objects.filter(run=active["run"]).update(judge_value=1.0, final_value=1.0)
    again = active_sample(active["policy"], active["dataset"])
    assert again.probability == drawn.probability
    assert SampleInclusion.objects.filter(dataset=active["dataset"]).count() == SIZE


def test_queue_serves_the_active_sample_and_board_weights_reviews(active, client):
    run, people, judged = active["run"], active["people"], active["judged"]
    reviewer = make_user("reviewer")
    queue = Queue(run=run, user=reviewer, order="random")
    drawn = active_sample(active["policy"], active["dataset"])
    order = drawn.order()
    assert queue.ordered_ids == order
    position = {
        pk: i
        for i, pk in enumerate(
            Item.objects.filter(dataset=active["dataset"])
            .order_by("position")
            .values_list("pk", flat=True)
        )
    }
    # Review the first 8 served, skip the 9th, review the 10th.
    done = [*order[:8], order[9]]
    for pk in done:
        i = position[pk]
        score = f.score(run, f"k{i}", "accuracy")
        if people[i] == judged[i]:
            score.confirm(reviewer)
        else:
            score.override(people[i], reviewer, "read it")
    board = boards.build(active["task"], boards.Params.from_query({}))
    board.corrected = corrected.build(board)
    assert board.corrected is not None
    cell = board.corrected.rows[0].cells["accuracy"]
    assert cell is not None
    # The 9th is not reviewed: c is its ratio, the 10th waits; the first 8 count, each
    # with probability min(1, c · π).
    c = drawn.ratio(order[8])
    labelled = np.zeros(SIZE, dtype=bool)
    pi = np.zeros(SIZE)
    for pk, at in position.items():
        pi[at] = min(1.0, c * drawn.probability[pk])
    for pk in order[:8]:
        labelled[position[pk]] = True
    expected = active_mean(np.where(labelled, people, np.nan), judged, labelled, pi)
    assert expected is not None
    assert (cell.mean, cell.low, cell.high, cell.n) == (
        pytest.approx(expected.mean, abs=1e-9),
        pytest.approx(expected.low, abs=1e-9),
        pytest.approx(expected.high, abs=1e-9),
        8,
    )
    assert board.corrected.rows[0].sampled == len(order)
    assert "active sample of 25 %" in board.corrected.sample_label

    # The reviews a width needs are for the ranking key, the overall (0–100). Asked for a
    # little less than the width it has: more reviews, fewer than the items left.
    overall = board.corrected.rows[0].overall
    assert overall is not None
    width = overall.high - overall.low
    target = round(width * 0.9, 1)
    board.corrected = corrected.build(board, target=target)
    more = board.corrected.rows[0].reviews_needed
    viewer = make_user("viewer")
    client.force_login(viewer)
    html = client.get(
        reverse("leaderboards:task", args=[active["task"].slug]), {"target": str(target)}
    ).content.decode()
    assert 'id="corrected-target"' in html
    # The board says what the design is: weighted reviews, not "drawn at random" (#31.2).
    assert "each review weighted by 1/π" in html and "every item alike" not in html
    assert 'data-stat="reviews-needed">' in html
    assert more is not None and 0 < more <= SIZE - 8
    assert f'data-stat="reviews-needed">{more}<' in html
    # The exports carry it, and the design (#31.1): JSONL and CSV of the same query.
    export = reverse("leaderboards:task-export", args=[active["task"].slug])

    def body(fmt: str) -> str:
        got = client.get(export, {"format": fmt, "target": str(target)})
        return (b"".join(got.streaming_content) if got.streaming else got.content).decode()

    first = json.loads(body("jsonl").splitlines()[0])
    assert first["corrected"]["reviews_needed"] == more
    assert first["judge_corrected"]["sample_design"] == "active"
    assert first["judge_corrected"]["target_width"] == target
    assert first["judge_corrected"]["method"].startswith("active inference")
    (row, *_) = csv.DictReader(io.StringIO(body("csv").lstrip("\ufeff")))
    assert row["corrected.reviews_needed"] == str(more)
    assert (row["corrected.design"], row["corrected.target_width"]) == ("active", str(target))
    # And the API, with the same query (#31.1).
    _, raw = ApiToken.issue(viewer, "script")
    api = client.get(
        f"/api/v1/leaderboards/{active['task'].slug}/",
        {"target": str(target)},
        headers={"Authorization": f"Bearer {raw}"},
    ).json()
    assert api["rows"][0]["corrected"]["reviews_needed"] == more
    assert api["judge_corrected"]["sample_design"] == "active"
    # Asked for the width it has: about none more (the count is of expected reviews, Σ π).
    wide = corrected.build(board, target=width + 1e-6)
    assert wide is not None and wide.rows[0].reviews_needed is not None
    assert wide.rows[0].reviews_needed <= 2
    narrow = corrected.build(board, target=width / 3)
    assert narrow is not None and narrow.rows[0].reviews_needed is None
