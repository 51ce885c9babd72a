"""Doubtful items go to people (#14.4): with the task's rule, items whose rounds disagree
beyond a spread or whose reply was read only by tolerant parsing are "needs a person": served
first in that queue order, listed by the results filter, counted on the board until reviewed.
The judging is real (RQ jobs, SDK, loopback server), so the repaired flag comes from parsing."""

import re

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from apps.judges.judge_prompts import rubric_context
from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, JudgeRound, RunItemQuerySet, TaskJudging
from apps.judges.parsing import parse_rubric_reply, response_format_for
from apps.review.queue import Queue, orders_for
from tests.base import make_user, work_here
from tests.factories import (
    SUBJECTS,
    make_answers_dataset,
    make_judge,
    rubric_reply,
    score,
    set_judging,
)
from tests.review.test_queue import walk

N = 8
FENCED = "Sure!\n```json\n" + rubric_reply(4, 4) + "\n```"


@pytest.mark.parametrize(
    ("reply", "repaired"),
    [
        (rubric_reply(3, 4), False),
        ("  " + rubric_reply(3, 4) + "\n", False),
        (FENCED, True),
        ("Scores: {'accuracy': 3, 'clarity': 4}", True),
    ],
)
def test_a_reply_is_repaired_when_it_is_not_one_clean_json_object(reply, repaired) -> None:
    assert parse_rubric_reply(reply, SUBJECTS).repaired is repaired


@pytest.fixture
def judged(task, endpoint, llm_server):
    """Two rounds per item: answer 2 splits its rounds (5 then 1), answer 5 is fenced, the
    rest agree in clean JSON."""
    dataset = make_answers_dataset(task, N)
    judge = make_judge(task, name="quality", n_iter=2)
    llm_server.configure(
        default_reply=rubric_reply(4, 4),
        script=[
            {"match": "answer number 2\n", "reply": rubric_reply(5, 4), "times": 1},
            {"match": "answer number 2\n", "reply": rubric_reply(1, 4)},
            {"match": "answer number 5\n", "reply": FENCED},
        ],
    )
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    return run


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_doubtful_items_go_first_and_are_counted_until_reviewed(judged) -> None:
    run, task = judged, judged.task
    assert set(
        JudgeRound.objects.filter(run=run, repaired=True).values_list("item__position", flat=True)
    ) == {5}
    items = RunItemQuerySet.of(run)
    assert not items.doubtful().exists() and "doubtful" not in orders_for(run)  # no rule yet

    admin = Client()
    admin.force_login(make_user("admin", "boss"))
    policy = reverse("review:policy", args=[task.slug])
    saved = admin.post(policy, {"reviews_per_item": 1, "doubt_spread": "1", "doubt_repaired": "on"})
    assert saved.status_code == 302
    rule = TaskJudging.of(task.pk)
    assert (rule.doubt_spread, rule.doubt_repaired) == (1.0, True)
    run.refresh_from_db()
    assert sorted(i.position for i in RunItemQuerySet.of(run).doubtful()) == [2, 5]
    alice = make_user("reviewer", "alice")
    assert "doubtful" in orders_for(run)
    assert walk(Queue(run, alice, order="doubtful")) == [2, 5, 0, 1, 3, 4, 6, 7]

    viewer = Client()
    viewer.force_login(make_user("viewer", "watcher"))
    results = reverse("judges:results", args=[run.pk])
    html = viewer.get(results, {"doubtful": "1"}).content.decode()
    assert "Needs a person" in html and html.count("<tr data-item=") == 2
    board = reverse("leaderboards:task", args=[task.slug])

    def still_doubtful() -> int:
        html = viewer.get(board).content.decode()
        found = re.search(rf'class="doubtful-link" data-run="{run.pk}"[^>]*>[^<]*: (\d+)</a>', html)
        assert found, "the board shows the run's doubtful count"
        return int(found.group(1))

    assert still_doubtful() == 2
    for subject in ("accuracy", "clarity"):
        score(run, "q2", subject).confirm(alice)
    assert still_doubtful() == 1  # one left to look at

    # Only the spread rule: the fenced reply is no longer doubtful.
    admin.post(policy, {"reviews_per_item": 1, "doubt_spread": "1"})
    assert [i.position for i in RunItemQuerySet.of(run).doubtful()] == [2]


@pytest.mark.parametrize(
    ("stated", "read"),
    [(0.3, 0.3), ('"85%"', 0.85), (85, 0.85), ('"high"', None), (150, None), (-1, None)],
)
def test_a_stated_confidence_is_read_as_a_share(stated, read) -> None:
    reply = '{"accuracy": 3, "clarity": 4, "confidence": %s}' % stated  # noqa: UP031 - braces
    assert parse_rubric_reply(reply, SUBJECTS, confidence=True).confidence == read
    assert parse_rubric_reply(reply, SUBJECTS).confidence is None  # not asked: not read
    assert parse_rubric_reply(rubric_reply(3, 4), SUBJECTS, confidence=True).confidence is None


def test_asking_for_confidence_shows_in_the_format_and_the_schema() -> None:
    context = rubric_context(SUBJECTS, "r", confidence=True)
    assert '"confidence": <number from 0 to 1' in context["json_format"]
    assert "confidence" not in rubric_context(SUBJECTS, "r")["json_format"]
    schema = response_format_for(SUBJECTS, confidence=True)["json_schema"]["schema"]
    assert "confidence" in schema["properties"] and "confidence" in schema["required"]


@pytest.mark.django_db
def test_confidence_is_for_rubric_judges_without_a_subject_of_that_name(
    task, reviewer_client
) -> None:
    url = reverse("judges:create") + f"?task={task.slug}"
    form = {"task": task.slug, "kind": "rubric", "aggregation": "mean", "label_type": "upper"}
    form |= {"label_count": 4, "n_iter": 1, "ask_confidence": "on"}
    page = reviewer_client.post(url, form | {"name": "a", "subjects_text": "confidence 1 5"})
    assert "A subject is named confidence" in page.content.decode()
    reviewer_client.post(url, form | {"name": "b", "subjects_text": "accuracy 1 5"})
    assert Judge.objects.get(name="b").ask_confidence
    metric = form | {"name": "c", "kind": "metric", "metric": "exact_match", "subjects_text": ""}
    reviewer_client.post(url, metric)
    assert not Judge.objects.get(name="c").ask_confidence


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_low_stated_confidence_sends_the_item_to_people(task, endpoint, llm_server) -> None:
    dataset = make_answers_dataset(task, 4)
    judge = make_judge(task, name="sure", ask_confidence=True)
    sure = '{"accuracy": 4, "clarity": 4, "confidence": 0.9}'
    llm_server.configure(
        default_reply=sure,
        script=[{"match": "answer number 3\n", "reply": sure.replace("0.9", "0.2")}],
    )
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    asked = llm_server.stats()["log"][0]["messages"][0]["content"]
    assert '"confidence": <number from 0 to 1' in asked
    stated = dict(JudgeRound.objects.filter(run=run).values_list("item__position", "confidence"))
    assert stated == {0: 0.9, 1: 0.9, 2: 0.9, 3: 0.2}
    assert not RunItemQuerySet.of(run).doubtful().exists()
    set_judging(task, doubt_confidence=0.5)
    assert [i.position for i in RunItemQuerySet.of(run).doubtful()] == [3]
    client = Client()
    client.force_login(make_user("reviewer", "rita"))
    item = dataset.items.get(position=3)
    html = client.get(reverse("review:item", args=[run.pk, item.pk])).content.decode()
    assert "confidence 0.20" in html
