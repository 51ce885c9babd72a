"""Kill a worker mid-run (SIGKILL, the work horse too), resume, and check that the rounds that
existed at the kill are untouched and every (item, round) ends exactly once."""

import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from apps.judges.launching import create_judge_run
from apps.judges.models import JudgeRound, Score
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.models import Run
from tests.base import wait_for, work
from tests.factories import make_answers_dataset, make_judge, rubric_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ITEMS = 40
ROUNDS = 2


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(child) for child in path.read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def kill_hard(pid: int) -> None:
    """SIGKILL the worker and its work horses (RQ forks each job into its own process group),
    as a machine that dies would: nothing gets to clean up."""
    for child in children(pid):
        for grandchild in children(child):
            os.kill(grandchild, signal.SIGKILL)
        os.kill(child, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def test_kill_and_resume_keeps_finished_rounds(task, endpoint, llm_server, workers):
    dataset = make_answers_dataset(task, ITEMS)
    judge = make_judge(task, n_iter=ROUNDS)
    llm_server.configure(latency=0.25, default_reply=rubric_reply(3, 4))
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")

    worker = workers()
    wait_for(
        lambda: Score.objects.filter(run=run, subject="accuracy").count() >= 8,
        timeout=90,
        what="some items judged",
    )
    kill_hard(worker.pid)
    worker.wait(timeout=10)

    at_kill = {
        (r.item_id, r.round): (r.pk, r.values, r.raw_reply, r.created_at, r.launch)
        for r in JudgeRound.objects.filter(run=run)
    }
    judged = set(
        Score.objects.filter(run=run, subject="accuracy").values_list("item_id", flat=True)
    )
    assert 8 <= len(judged) < ITEMS, "the kill must land mid-run"
    # An item is written whole or not at all: every judged item has all its rounds, no other
    # item has any.
    assert {item for item, _ in at_kill} == judged
    assert len(at_kill) == ROUNDS * len(judged)

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    with pytest.raises(LaunchError):  # its worker may still be alive as far as anyone knows
        launch(run, Run.Mode.RESUME)
    # ...until it has not reported for a while (Run.STALL_AFTER): then it shows as stalled.
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    run.refresh_from_db()
    assert run.is_stalled and run.can_resume

    llm_server.reset(stats_only=True)
    with transaction.atomic():
        todo = launch(run, Run.Mode.RESUME)
    assert todo == ITEMS - len(judged)
    work(timeout=180)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert (run.done, run.failed) == (ITEMS, 0)
    rounds = JudgeRound.objects.filter(run=run)
    assert rounds.count() == ITEMS * ROUNDS
    per_pair = rounds.values("item_id", "round").annotate(n=Count("pk")).order_by()
    assert all(row["n"] == 1 for row in per_pair) and len(per_pair) == ITEMS * ROUNDS
    for judge_round in rounds:
        key = (judge_round.item_id, judge_round.round)
        if key in at_kill:
            snapshot = (
                judge_round.pk,
                judge_round.values,
                judge_round.raw_reply,
                judge_round.created_at,
                judge_round.launch,
            )
            assert snapshot == at_kill[key]
    assert Score.objects.filter(run=run, status="ok").count() == ITEMS * 2

    # Only the items without a result were asked again, each round once.
    log = llm_server.stats()["log"]
    assert len(log) == ROUNDS * (ITEMS - len(judged))
    asked = "\n".join(m["content"] for entry in log for m in entry["messages"])
    for item in dataset.items.filter(pk__in=judged):
        assert f"answer number {item.position}\n</response>" not in asked


def test_cancel_stops_asking_and_resume_finishes_the_rest(task, endpoint, llm_server, workers):
    from apps.runs.engine.lifecycle import cancel

    dataset = make_answers_dataset(task, ITEMS)
    judge = make_judge(task, n_iter=ROUNDS)
    llm_server.configure(latency=0.25, default_reply=rubric_reply(2, 2))
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    workers()
    wait_for(
        lambda: Score.objects.filter(run=run, subject="accuracy").count() >= 4,
        timeout=90,
        what="some items judged",
    )
    cancel(run)
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED,
        timeout=30,
        what="the run to stop",
    )
    run.refresh_from_db()
    judged = Score.objects.filter(run=run, subject="accuracy").count()
    assert judged < ITEMS and run.done == judged
    assert JudgeRound.objects.filter(run=run).count() == ROUNDS * judged
    requests = llm_server.stats(log=False)["requests"]
    assert requests < ROUNDS * ITEMS

    with transaction.atomic():
        assert launch(run, Run.Mode.RESUME) == ITEMS - judged
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED,
        timeout=90,
        what="the resumed run to finish",
    )
    run.refresh_from_db()
    assert (run.done, run.failed) == (ITEMS, 0)
    assert JudgeRound.objects.filter(run=run).count() == ROUNDS * ITEMS
