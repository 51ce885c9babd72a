"""A pairwise run on the engine, the hard way: a worker killed mid-run (SIGKILL, work horses
too) loses no finished comparison and the resume asks only what is left, each (item, pair,
order) ending exactly once; a cancel stops asking and a resume finishes; tokens, prices and
attempt logs add up per comparison."""

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from apps.judges.models import Comparison, Judge
from apps.judges.pairwise import create_pairwise_run
from apps.runs.engine.launch import launch
from apps.runs.engine.lifecycle import cancel
from apps.runs.models import AttemptLog, Run
from tests.base import wait_for, work
from tests.factories import make_generation_run, make_judge, make_qa_dataset
from tests.judges.test_judge_run_resume import kill_hard

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ITEMS = 30
PRICES = json.dumps({"test-model": [2.0, 10.0]})  # USD per 1M tokens: input, output


@pytest.fixture
def pair(task):
    dataset = make_qa_dataset(task, ITEMS)
    a = make_generation_run(dataset, {i: f"first {i}" for i in range(ITEMS)}, label="a")
    b = make_generation_run(dataset, {i: f"second {i}" for i in range(ITEMS)}, label="b")
    judge = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    return dataset, a, b, judge


def start(judge, runs, endpoint, **options) -> Run:
    with transaction.atomic():
        return create_pairwise_run(judge, runs, endpoint=endpoint, **options)


def exactly_once(run: Run) -> None:
    counts = (
        Comparison.objects.filter(run=run)
        .values("item_id", "a_run_id", "b_run_id", "order")
        .annotate(n=Count("pk"))
        .order_by()
    )
    assert len(counts) == ITEMS * 2 and all(row["n"] == 1 for row in counts)


def test_a_killed_worker_loses_no_comparison_and_resume_asks_only_the_rest(
    pair, endpoint, llm_server, workers
) -> None:
    _, a, b, judge = pair
    llm_server.configure(latency=0.25, default_reply='{"verdict": "A", "reason": "r"}')
    run = start(judge, [a, b], endpoint)
    worker = workers()
    wait_for(lambda: Comparison.objects.filter(run=run).count() >= 8, timeout=90, what="some pairs")
    kill_hard(worker.pid)
    worker.wait(timeout=10)
    at_kill = {
        (c.item_id, c.order): (c.pk, c.raw_reply, c.created_at, c.launch)
        for c in Comparison.objects.filter(run=run)
    }
    judged = {item for item, _ in at_kill}
    assert 4 <= len(judged) < ITEMS, "the kill must land mid-run"
    assert len(at_kill) == 2 * len(judged)  # a unit is written with both orders or not at all
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    run.refresh_from_db()
    assert run.is_stalled and run.can_resume
    llm_server.reset(stats_only=True)
    with transaction.atomic():
        assert launch(run, Run.Mode.RESUME) == ITEMS - len(judged)
    work(timeout=180)
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, ITEMS, 0)
    exactly_once(run)
    for c in Comparison.objects.filter(run=run):
        if (c.item_id, c.order) in at_kill:
            assert (c.pk, c.raw_reply, c.created_at, c.launch) == at_kill[(c.item_id, c.order)]
    assert llm_server.stats(log=False)["requests"] == 2 * (ITEMS - len(judged))


def test_cancel_stops_asking_and_resume_finishes_with_costs_and_logs(
    pair, endpoint, llm_server, workers
) -> None:
    _, a, b, judge = pair
    llm_server.configure(latency=0.25, default_reply='{"verdict": "B"}')
    run = start(judge, [a, b], endpoint, logging_mode="all")
    workers(EVALSITE_PRICE_TABLE=PRICES)
    wait_for(lambda: Comparison.objects.filter(run=run).count() >= 4, timeout=90, what="some pairs")
    cancel(run)
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED,
        timeout=30,
        what="the run to stop",
    )
    run.refresh_from_db()
    units = Comparison.objects.filter(run=run).count() // 2
    assert units < ITEMS and run.done == units
    with transaction.atomic():
        assert launch(run, Run.Mode.RESUME) == ITEMS - units
    work(timeout=180, EVALSITE_PRICE_TABLE=PRICES)
    # The workers started above may hold the last chunk when the burst worker finds the queue
    # empty: the run ends when they finish it.
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status not in Run.ACTIVE_STATUSES,
        timeout=180,
        what="the resumed run to end",
    )
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, ITEMS, 0)
    exactly_once(run)
    # Tokens and cost: the run's totals are the sum of its comparisons', at the stated prices.
    sums = Comparison.objects.filter(run=run).aggregate(
        p=Sum("prompt_tokens"), c=Sum("completion_tokens"), cost=Sum("cost")
    )
    assert (run.prompt_tokens, run.completion_tokens) == (sums["p"], sums["c"]) and sums["p"] > 0
    expected = (sums["p"] * 2.0 + sums["c"] * 10.0) / 1_000_000
    assert run.cost == pytest.approx(expected) and sums["cost"] == pytest.approx(expected)
    # Every request is logged (logging "all"), each with the order it showed as its round.
    logs = AttemptLog.objects.filter(run=run)
    assert logs.count() >= ITEMS * 2
    assert set(logs.values_list("round", flat=True)) == {0, 1}
