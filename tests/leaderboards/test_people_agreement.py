"""Agreement between people (#12.4–6): per subject, tag, pair and reviewer; the judge beside
people as its ceiling on the agreement page; the reviews export; `manage.py agreement`."""

import csv
import io
import json

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from apps.judges.models import Score, judge_of
from apps.leaderboards import boards
from apps.leaderboards.people import people_agreement
from apps.review.models import Review, ReviewPolicy
from tests.base import make_user
from tests.factories import judge_item, make_item, make_judge_run, make_review_dataset, make_task

NAN = np.nan
# accuracy (1–5, judged 4 everywhere): rows are items q0–q3, columns ann, ben, cat.
VALUES = [[4, 4, 4], [2, 3, NAN], [5, 5, 4], [1, NAN, NAN]]
TAGS = [["easy"], ["hard"], ["easy"], ["hard"]]


@pytest.fixture
def reviewed(db):
    task = make_task("people")
    dataset = make_review_dataset(task)
    items = [make_item(dataset, i, tags=TAGS[i]) for i in range(4)]
    run = make_judge_run(dataset)
    for item in items:
        judge_item(run, item, [{"accuracy": 4, "clarity": 3}])
    ReviewPolicy.objects.create(task=task, reviews_per_item=3, thresholds={"accuracy": 1})
    names = ["ann", "ben", "cat"]
    users = [make_user("reviewer", name) for name in names]
    for item, row in zip(items, VALUES, strict=True):
        score = Score.objects.get(run=run, item=item, subject="accuracy")
        for user, value in zip(users, row, strict=True):
            if not np.isnan(value):
                Review.submit(score, user, value, f"{user.username} on {item.key}", 10 + value)
    return task, run


def test_per_subject_pair_tag_and_reviewer(reviewed) -> None:
    task, _ = reviewed
    found = people_agreement(task)
    [accuracy] = found.subjects
    assert (accuracy.subject, accuracy.level, accuracy.units, accuracy.reviews) == (
        "accuracy",
        "ordinal",
        3,
        9,
    )
    reference = krippendorff.alpha(
        reliability_data=np.array(VALUES, float).T, level_of_measurement="ordinal"
    )
    assert accuracy.alpha == pytest.approx(reference, abs=1e-9)
    assert accuracy.fleiss is None  # not a right/wrong subject
    assert accuracy.percent == pytest.approx((1 + 0 + 1 / 3) / 3)
    # (judge 4, review) pairs: q0 3 of 3, q1 0 of 2, q2 1 of 3, q3 0 of 1.
    assert (accuracy.judge_percent, accuracy.judge_pairs) == (pytest.approx(4 / 9), 9)
    tags = {t["tag"]: t for t in accuracy.tags}
    assert tags["easy"]["units"] == 2 and tags["hard"]["units"] == 1
    assert tags["easy"]["percent"] == pytest.approx((1 + 1 / 3) / 2)
    pairs = {(p.a, p.b): p for p in found.pairs}
    assert (pairs[("ann", "ben")].n, pairs[("ann", "ben")].percent) == (3, pytest.approx(2 / 3))
    assert (pairs[("ann", "cat")].n, pairs[("ann", "cat")].percent) == (2, pytest.approx(1 / 2))
    ann = next(r for r in found.reviewers if r.username == "ann")
    assert (ann.items, ann.reviews, ann.median_seconds) == (4, 4, pytest.approx(13))  # 11 12 14 15
    # Settled scores: q0 (consensus 4) and q2 (mean 14/3); ann's 4 and 5 match neither's value
    # exactly except q0's.
    assert (ann.settled, ann.with_people) == (2, pytest.approx(1 / 2))
    assert ann.with_judge == pytest.approx(1 / 4)
    assert ann.settled_distance == pytest.approx((0 + abs(5 - 14 / 3)) / 2)
    assert ann.judge_distance == pytest.approx((0 + 2 + 1 + 3) / 4)


def test_the_agreement_page_shows_people_beside_the_judge(reviewed) -> None:
    task, _ = reviewed
    client = Client()
    client.force_login(make_user("viewer"))
    html = client.get(reverse("leaderboards:agreement", args=[task.slug])).content.decode()
    assert 'id="between-people"' in html and 'id="reviewer-pairs"' in html
    assert "People agree with each other more often than with the judge." not in html
    assert "The judge agrees with people at least as often as people agree with each other." in html
    assert 'data-reviewer="cat"' in html


def test_the_reviews_export_has_a_row_per_review(reviewed) -> None:
    _, run = reviewed
    client = Client()
    client.force_login(make_user("viewer"))
    url = reverse("leaderboards:run-reviews", args=[run.pk])
    body = b"".join(client.get(url, {"format": "csv"}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body.lstrip("\ufeff"))))
    assert len(rows) == 9
    first = rows[0]
    assert (first["key"], first["subject"], first["reviewer"], first["value"]) == (
        "q0",
        "accuracy",
        "ann",
        "4.0",
    )
    assert first["settled_by"] == "consensus" and first["final_value"] == "4.0"
    assert {r["settled_by"] for r in rows if r["key"] == "q1"} == {""}  # 2 of 3 reviews
    lines = b"".join(client.get(url, {"format": "jsonl"}).streaming_content).decode().splitlines()
    assert [json.loads(line)["reviewer"] for line in lines[:3]] == ["ann", "ben", "cat"]


def test_the_agreement_command(reviewed, capsys) -> None:
    task, run = reviewed
    call_command("agreement", task.slug, "--format", "json")
    data = json.loads(capsys.readouterr().out)
    assert data["subjects"][0]["percent_agreement"] == pytest.approx(4 / 9)
    assert {p["reviewer"] + "·" + p["other_reviewer"] for p in data["pairs"]} == {
        "ann·ben",
        "ann·cat",
        "ben·cat",
    }
    call_command("agreement", task.slug, "--run", str(run.pk))
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out.lstrip("\ufeff"))))
    kinds = [row["kind"] for row in rows]
    assert kinds.count("subject") == 1 and kinds.count("reviewer") == 3
    with pytest.raises(CommandError, match="has no judge run #999"):
        call_command("agreement", task.slug, "--run", "999")


def test_the_human_corrected_board_uses_the_consensus(reviewed) -> None:
    task, run = reviewed
    board = boards.build(task, boards.Params(judge_id=judge_of(run).pk))
    cells = board.rows[0].cells
    # q2's three reviews (5, 5, 4) settle on 14/3; q0's on the judge's 4; q1 and q3 wait.
    assert cells["judge"]["accuracy"].mean == pytest.approx(4)
    assert cells["human"]["accuracy"].mean == pytest.approx((4 + 4 + 14 / 3 + 4) / 4)
    assert cells["human"]["accuracy"].overridden == 1
