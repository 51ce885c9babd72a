"""Judging a generation run of several epochs: every epoch's response is judged (with the
judge's rounds each), the judge value is the mean over epochs, each epoch's value is kept, and
a failed epoch fails the item until it is answered and retried, without asking the others
again."""

from collections import Counter

import pytest
from django.db import transaction

from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, JudgeRound, RunItemQuerySet, Score
from apps.runs.engine.launch import launch
from apps.runs.models import AttemptLog, ErrorKind, Response, Run
from tests.base import work_here
from tests.factories import make_generation_run, make_judge, make_qa_dataset, rubric_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def score_of(run: Run, position: int) -> Score:
    return Score.objects.get(run=run, item__position=position)


def test_an_exact_match_judge_scores_every_epoch(task) -> None:
    dataset = make_qa_dataset(task, 4)  # references "0", "2", "4", "6"
    generation = make_generation_run(
        dataset,
        {0: ["0", "0", "0"], 1: ["2", "x", "2"], 2: ["x", "x", "4"], 3: ["6", None, "6"]},
    )
    judge = make_judge(task, Judge.Kind.METRIC)
    with transaction.atomic():
        run = create_judge_run(judge, source_run=generation)
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed) == (3, 1)
    # A round per item and epoch; the epoch without a response is a failed round, not asked.
    assert JudgeRound.objects.filter(run=run).count() == 12
    unasked = JudgeRound.objects.get(run=run, item__position=3, epoch=1)
    assert unasked.status == JudgeRound.Status.FAILED and unasked.raw_reply == ""
    first, second, third = score_of(run, 0), score_of(run, 1), score_of(run, 2)
    assert (first.epoch_values, first.judge_value, first.epoch_spread) == ([100, 100, 100], 100, 0)
    assert second.epoch_values == [100, 0, 100] and second.epoch_spread == 100
    assert second.judge_value == pytest.approx(200 / 3)
    assert third.epoch_values == [0, 0, 100] and third.judge_value == pytest.approx(100 / 3)
    broken = score_of(run, 3)
    assert broken.status == Score.Status.FAILED and broken.judge_value is None
    assert broken.error_kind == ErrorKind.NO_RESPONSE
    assert "(epoch 2)" in broken.error and "(epoch 2 of 3)" in broken.error
    assert broken.epoch_values == [100, None, 100]
    # Flaky: the epochs disagree.
    flaky = RunItemQuerySet.of(run).flaky()
    assert sorted(flaky.values_list("position", flat=True)) == [1, 2]

    # The generation run answers epoch 2 of item 3; retrying judges only that epoch.
    Response.objects.filter(run=generation, item__position=3, epoch=1).update(
        status=Response.Status.OK, text="6", error_kind="", error=""
    )
    kept = {
        r.epoch: (r.pk, r.launch)
        for r in JudgeRound.objects.filter(run=run, item__position=3, epoch__in=[0, 2])
    }
    with transaction.atomic():
        assert launch(run, Run.Mode.RETRY_FAILED) == 1
    work_here()
    fixed = score_of(run, 3)
    assert fixed.status == Score.Status.OK and fixed.epoch_values == [100, 100, 100]
    rounds = JudgeRound.objects.filter(run=run, item__position=3).order_by("epoch")
    assert [(r.epoch, r.launch) for r in rounds] == [(0, 1), (1, 2), (2, 1)]
    assert {r.epoch: (r.pk, r.launch) for r in rounds if r.epoch != 1} == kept


def test_an_llm_judge_asks_each_epoch_its_rounds_and_logs_which(task, endpoint, llm_server):
    dataset = make_qa_dataset(task, 3)
    generation = make_generation_run(dataset, {i: [f"first {i}", f"second {i}"] for i in range(3)})
    judge = make_judge(task, n_iter=2)
    llm_server.configure(
        default_reply=rubric_reply(4, 4),
        script=[{"match": "second 1", "reply": rubric_reply(2, 4), "scope": "any"}],
    )
    with transaction.atomic():
        run = create_judge_run(judge, source_run=generation, endpoint=endpoint, logging_mode="all")
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.COMPLETED, 3)
    assert llm_server.stats()["requests"] == 3 * 2 * 2  # items × epochs × rounds
    logged = Counter(AttemptLog.objects.filter(run=run).values_list("epoch", "round"))
    assert logged == {(0, 0): 3, (0, 1): 3, (1, 0): 3, (1, 1): 3}
    accuracy = Score.objects.get(run=run, item__position=1, subject="accuracy")
    assert accuracy.epoch_values == [4, 2] and accuracy.judge_value == 3
    assert accuracy.round_values == [4, 4, 2, 2] and accuracy.spread == 0
    assert accuracy.epoch_spread == 2
    steady = Score.objects.get(run=run, item__position=0, subject="accuracy")
    assert steady.epoch_values == [4, 4] and steady.epoch_spread == 0
