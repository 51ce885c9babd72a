"""Webhooks (#32.3): a receiver on loopback gets a signed event of each kind, checked with the
Standard Webhooks reference library and by hand; the Slack-compatible payload; a receiver that
is down gets the retries, by the backoff (computed: the tests move time on, nothing sleeps);
an event told twice is delivered once; a run a person cancels tells no one."""

from datetime import timedelta
from decimal import Decimal

import django_rq
import pytest
from django.utils import timezone
from rq.registry import ScheduledJobRegistry

from apps.judges.models import ScoreEvent
from apps.leaderboards.gate import compare
from apps.leaderboards.models import BoardSettings
from apps.notifications import jobs
from apps.notifications.delivery import signature, webhook_body
from apps.notifications.models import (
    CHOSEN_EVENTS,
    MAX_ATTEMPTS,
    RETRY_DELAYS,
    Delivery,
    Event,
    Notice,
    Webhook,
    new_secret,
)
from apps.runs.engine.lifecycle import fail, finalize
from apps.runs.models import Response, Run
from tests import factories as f
from tests.base import work_here
from tests.notifications.receiver import Receiver

pytestmark = pytest.mark.django_db

N = 12
KINDS = sorted(event for event, _ in CHOSEN_EVENTS)  # every event but a test message


def work_all(capture) -> None:
    """Work the queues empty here, with what the jobs enqueue after their commits too (the
    test's transaction never commits)."""
    while True:
        with capture(execute=True) as callbacks:
            work_here()
        if not callbacks:
            return


def running_run(dataset, answered: int, label: str = "model-a") -> Run:
    """A generation run at work on its first launch with `answered` items answered."""
    run = Run.objects.create(
        task=dataset.task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        label=label,
        status=Run.Status.RUNNING,
        launch=1,
        total=dataset.items.count(),
        done=answered,
    )
    Response.objects.bulk_create(
        Response(run=run, item=item, status=Response.Status.OK, text="x", launch=1)
        for item in list(dataset.items.order_by("position"))[:answered]
    )
    return run


def gate_runs(task):
    """Two judge runs of one judge on 20 items: the candidate drops from 4 to 2 on half."""
    dataset = f.make_items(task, 20, name="gate-set")
    judge = f.make_judge(task, name="quality", subjects=f.SUBJECTS)
    runs = []
    for label, drop in (("model-a", False), ("model-b", True)):
        run = f.make_judge_run(dataset, judge, label=label)
        f.add_scores(
            run,
            {f"k{i}": {"accuracy": 2 if drop and i % 2 else 4, "clarity": 4} for i in range(20)},
        )
        runs.append(run)
    return runs


def review_below_threshold(task, reviewer, consensus: bool = False) -> None:
    """The default judge's scores of 12 items reviewed this week, 9 left at its value (75 %),
    under a threshold of 80 %: by `reviewer`, or settled by several reviewers' consensus (no
    user), under a threshold set without a signal (so that only the reviews can tell)."""
    dataset = f.make_answers_dataset(task, N)
    judge = f.make_judge(task, name="rubric", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    f.set_judging(task, default_judge=judge)
    run = f.make_judge_run(dataset, judge)
    f.add_scores(run, {f"q{i}": {"accuracy": 4} for i in range(N)})
    threshold = BoardSettings(task=task, alignment_threshold=0.8)
    if consensus:
        BoardSettings.objects.bulk_create([threshold])
    else:
        threshold.save()
    for i in range(N):
        found = f.score(run, f"q{i}", "accuracy")
        if consensus:
            found.settle_by_people(4 if i < 9 else 1, ScoreEvent.Kind.CONSENSUS, None, "agreed")
        elif i < 9:
            found.confirm(reviewer)
        else:
            found.override(1, reviewer, "wrong")


def test_a_signed_event_of_each_kind_reaches_the_receiver(
    task, webhook, receiver, reviewer_user, django_capture_on_commit_callbacks
):
    dataset = f.make_qa_dataset(task, 4)
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(dataset, answered=4).pk, 1)  # completes
        failing = running_run(dataset, answered=1, label="model-f")
        fail(failing.pk, "Stopped: the endpoint refused the API key (401)")
        spending = running_run(dataset, answered=2, label="model-s")
        spending.set_budget(Decimal("0.01"))
        spending.stop_for_budget(0.0098)
        finalize(spending.pk, 1)  # ends cancelled, stopped by its budget
        baseline, candidate = gate_runs(task)
        compare(baseline, candidate, margin=0.25)
        review_below_threshold(task, reviewer_user)
    work_all(django_capture_on_commit_callbacks)

    assert [r.why for r in receiver.got if not r.verified] == []
    by_event = {r.event: r.json for r in receiver.got}
    assert sorted(by_event) == KINDS and len(receiver.got) == len(KINDS) == 5
    for event, body in by_event.items():
        assert (body["type"], body["project"], body["task"]) == (event, "team-a", "qa")

    finished = by_event[Event.RUN_FINISHED]["data"]["run"]
    assert (finished["status"], finished["done"], finished["total"]) == ("completed", 4, 4)
    assert finished["url"].endswith(f"/runs/{finished['id']}/")
    failed = by_event[Event.RUN_FAILED]["data"]["run"]
    assert (failed["id"], failed["reason"]) == (
        failing.pk,
        "the endpoint refused the API key (401)",
    )
    stopped = by_event[Event.RUN_BUDGET]["data"]["run"]
    assert stopped["id"] == spending.pk and stopped["status"] == "cancelled"
    assert stopped["reason"].startswith("budget of $0.0100 reached: $0.0098 spent")
    gate = by_event[Event.GATE]["data"]
    assert (gate["verdict"], gate["exit_code"]) == ("regressed", 1)
    assert (gate["baseline"]["model"], gate["candidate"]["model"]) == ("model-a", "model-b")
    assert {s["subject"]: s["verdict"] for s in gate["subjects"]} == {
        "accuracy": "regressed",
        "clarity": "holds",
    }
    agreement = by_event[Event.AGREEMENT]["data"]
    assert (agreement["subject"], agreement["reviews"]) == ("accuracy", N)
    assert (agreement["agreement"], agreement["threshold"]) == (0.75, 0.8)
    # Each delivery is logged delivered, after one attempt, with the receiver's answer.
    logged = Delivery.objects.values_list("state", "attempts", "response_code")
    assert sorted(set(logged)) == [("delivered", 1, 204)] and len(logged) == len(KINDS)


def test_the_same_occurrence_is_told_once_and_a_cancel_by_a_person_not_at_all(
    task, webhook, receiver, reviewer_user, django_capture_on_commit_callbacks
):
    dataset = f.make_qa_dataset(task, 4)
    with django_capture_on_commit_callbacks(execute=True):
        run = running_run(dataset, answered=4)
        finalize(run.pk, 1)
        finalize(run.pk, 1)  # two chunks leaving last: one settles it
        cancelled = running_run(dataset, answered=1, label="model-c")
        cancelled.request_cancel()
        finalize(cancelled.pk, 1)
        review_below_threshold(task, reviewer_user)
        # Another review the same week, still below: this week's alarm was told already.
        judged = Run.objects.get(kind=Run.Kind.JUDGE)
        f.score(judged, "q0", "accuracy").override(2, reviewer_user, "second look")
    work_all(django_capture_on_commit_callbacks)
    assert sorted(r.event for r in receiver.got) == [Event.AGREEMENT, Event.RUN_FINISHED]
    assert Notice.objects.count() == 2


def test_a_consensus_of_several_reviewers_is_a_review_too(
    task, webhook, receiver, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        review_below_threshold(task, None, consensus=True)
    work_all(django_capture_on_commit_callbacks)
    assert [(r.event, r.verified) for r in receiver.got] == [(Event.AGREEMENT, True)]
    assert receiver.got[0].json["data"]["agreement"] == 0.75


def test_a_slack_webhook_gets_text_with_names_escaped(
    task, project, receiver, django_capture_on_commit_callbacks
):
    Webhook.objects.create(
        project=project,
        name="slack",
        url=receiver.url,
        secret=receiver.secret,
        events=[Event.RUN_FINISHED],
        payload=Webhook.Payload.SLACK,
    )
    dataset = f.make_qa_dataset(task, 2)
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(dataset, answered=2, label="<!channel> & co").pk, 1)
    work_all(django_capture_on_commit_callbacks)
    (got,) = receiver.got
    assert got.verified, got.why
    assert set(got.json) == {"text"}
    first, second = got.json["text"].split("\n")[:2]
    assert first.startswith("*Generation run #") and "(&lt;!channel&gt; &amp; co) finished" in first
    assert "2 of 2 done" in second and "<!channel>" not in got.json["text"]


def test_a_receiver_that_is_down_gets_the_retries_by_the_backoff(
    task, webhook, receiver, django_capture_on_commit_callbacks
):
    receiver.stop()
    dataset = f.make_qa_dataset(task, 2)
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(dataset, answered=2).pk, 1)
    work_all(django_capture_on_commit_callbacks)  # the first attempt: the connection is refused
    delivery = Delivery.objects.get()
    first = delivery.last_attempt_at
    assert (delivery.state, delivery.attempts, delivery.response_code) == ("pending", 1, None)
    assert "Connect" in delivery.error
    assert delivery.next_attempt_at == first + timedelta(seconds=RETRY_DELAYS[0])
    # The worker's scheduler holds the retry for that moment.
    scheduled = ScheduledJobRegistry(queue=django_rq.get_queue("default"))
    at = scheduled.get_scheduled_time(f"notify-{delivery.pk}-2")
    assert at == (delivery.next_attempt_at + timedelta(seconds=1)).replace(microsecond=0)

    # Not due a second early; then each retry waits its own delay, failing on: 500 answers.
    assert jobs.deliver_due(delivery.next_attempt_at - timedelta(seconds=1)) == []
    receiver.status = 500
    receiver.start()
    now = delivery.next_attempt_at
    for attempt in range(2, MAX_ATTEMPTS):
        assert jobs.deliver_due(now) == [f"attempt {attempt} failed; next at {_at(now, attempt)}"]
        delivery.refresh_from_db()
        assert (delivery.attempts, delivery.response_code, delivery.error) == (
            attempt,
            500,
            "HTTP 500",
        )
        now = delivery.next_attempt_at
        assert now == delivery.last_attempt_at + timedelta(seconds=RETRY_DELAYS[attempt - 1])
    assert len(receiver.got) == MAX_ATTEMPTS - 2 and all(r.verified for r in receiver.got)
    # One id across the attempts (a receiver drops repeats by it), a fresh timestamp on each.
    assert {r.headers["webhook-id"] for r in receiver.got} == {delivery.message_id}

    receiver.status = 204  # back, at the last attempt
    assert jobs.deliver_due(now) == ["delivered"]
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.response_code) == (
        "delivered",
        MAX_ATTEMPTS,
        204,
    )
    assert jobs.deliver_due(now + timedelta(days=1)) == []  # nothing is sent twice


def _at(now, attempt: int) -> str:
    return (now + timedelta(seconds=RETRY_DELAYS[attempt - 1])).isoformat()


def test_after_the_last_attempt_it_gives_up_and_a_person_can_send_it_again(
    task, webhook, receiver, django_capture_on_commit_callbacks
):
    receiver.status = 503
    dataset = f.make_qa_dataset(task, 2)
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(dataset, answered=2).pk, 1)
    work_all(django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    now = timezone.now()
    for _ in range(MAX_ATTEMPTS - 1):
        now += timedelta(days=1)
        jobs.deliver_due(now)
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == (Delivery.State.FAILED, MAX_ATTEMPTS)
    assert len(receiver.got) == MAX_ATTEMPTS
    assert jobs.deliver_due(now + timedelta(days=30)) == []

    receiver.status = 200
    delivery.send_again(timezone.now())
    assert jobs.deliver_job(delivery.pk) == "delivered"
    assert len(receiver.got) == MAX_ATTEMPTS + 1 and receiver.got[-1].verified


def test_a_job_run_twice_sends_once(task, webhook, receiver, django_capture_on_commit_callbacks):
    dataset = f.make_qa_dataset(task, 2)
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(dataset, answered=2).pk, 1)
    delivery = Delivery.objects.get()
    assert jobs.deliver_job(delivery.pk) == "delivered"
    said = "delivered or given up already, or taken by another job"
    assert jobs.deliver_job(delivery.pk) == said
    work_all(django_capture_on_commit_callbacks)  # the queued job finds it delivered
    assert len(receiver.got) == 1


def test_a_job_that_comes_early_schedules_the_attempt_again(task, webhook, receiver):
    """A worker whose clock is behind the web server's finds a new delivery not due yet: it
    leaves it to the scheduler, at its time, instead of dropping it."""
    finalize(running_run(f.make_qa_dataset(task, 2), answered=2).pk, 1)
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=timezone.now() + timedelta(seconds=20)
    )
    delivery.refresh_from_db()
    assert jobs.deliver_job(delivery.pk) == f"not due until {delivery.next_attempt_at.isoformat()}"
    scheduled = ScheduledJobRegistry(queue=django_rq.get_queue("default"))
    at = scheduled.get_scheduled_time(f"notify-{delivery.pk}-1")
    assert at == (delivery.next_attempt_at + timedelta(seconds=1)).replace(microsecond=0)
    assert receiver.got == [] and Delivery.objects.get().attempts == 0


def test_a_forged_or_stale_request_fails_the_receivers_check(task, webhook, receiver):
    """The receiver's check is a real one: a body changed after signing, another secret, or an
    old timestamp are refused (so the test above would see a broken signature)."""
    dataset = f.make_qa_dataset(task, 2)
    finalize(running_run(dataset, answered=2).pk, 1)
    delivery = Delivery.objects.get()
    body = webhook_body(delivery.notice, webhook)
    now = int(timezone.now().timestamp())
    good = {
        "webhook-id": delivery.message_id,
        "webhook-timestamp": str(now),
        "webhook-signature": signature(webhook.secret, delivery.message_id, now, body),
    }
    assert receiver.check(good, body).verified
    assert not receiver.check(good, body.replace(b'"done": 2', b'"done": 9')).verified
    other = Receiver(secret=new_secret())
    assert not other.check(good, body).verified
    old = now - 600
    stale = {**good, "webhook-timestamp": str(old)}
    stale["webhook-signature"] = signature(webhook.secret, delivery.message_id, old, body)
    assert "too old" in receiver.check(stale, body).why
