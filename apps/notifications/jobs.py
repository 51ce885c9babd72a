"""Jobs of notifications: deliveries, retried with backoff, and the agreement check.

A delivery's attempt runs in a worker (`deliver_job`); a failed one schedules the next at its
`next_attempt_at` with RQ's scheduler (the worker's --with-scheduler). The Delivery row is the
truth: a job that finds it delivered, given up, not due yet or taken by another job does
nothing, so any job may run twice. Should Redis lose a scheduled retry, `manage.py
send_notifications` (or the page's "Send now") sends what is due.
"""

import logging
from datetime import datetime, timedelta

import django_rq
import redis
from django.utils import timezone

from apps.datasets.models import Task
from apps.leaderboards.alignment import alarms
from apps.notifications import delivery as deliveries
from apps.notifications import notices
from apps.notifications.models import Delivery
from evalsite.enqueue import Queue, enqueue

logger = logging.getLogger(__name__)

QUEUE: Queue = "default"
# Reviews of one task coalesce into one agreement check while it waits in the queue.
AGREEMENT_CLAIM = "evalsite:notifications:agreement:{task_id}"
AGREEMENT_CLAIM_SECONDS = 600


def deliver_job(delivery_id: int) -> str:
    """One attempt of one delivery, now; schedules the next if it failed and may retry."""
    found = Delivery.objects.filter(pk=delivery_id).first()
    return "gone" if found is None else _deliver(found, timezone.now())


def deliver_due(now: datetime | None = None) -> list[str]:
    """Attempt every delivery due at `now` (by default now), here; what became of each.
    What `send_notifications` runs, and how tests move time on instead of sleeping."""
    now = now or timezone.now()
    return [_deliver(d, now) for d in Delivery.objects.due(now).order_by("next_attempt_at", "pk")]


def _deliver(found: Delivery, now: datetime) -> str:
    went = deliveries.attempt(found, now)
    if went is None and found.state == Delivery.State.PENDING and found.next_attempt_at > now:
        # Early: a worker whose clock is behind the web server's, or a job run again. Its
        # attempt is scheduled again (by the attempt's job id: one job however often).
        schedule(found)
        return f"not due until {found.next_attempt_at.isoformat()}"
    if went is None:
        return "delivered or given up already, or taken by another job"
    if went:
        return "delivered"
    if found.state == Delivery.State.PENDING:
        schedule(found)
        return f"attempt {found.attempts} failed; next at {found.next_attempt_at.isoformat()}"
    return f"attempt {found.attempts} failed; gave up"


def start(made: list[Delivery]) -> None:
    """Deliver each once the transaction that made it commits."""
    for delivery in made:
        enqueue(deliver_job, delivery.pk, queue=QUEUE, job_id=_job_id(delivery), timeout=300)


def schedule(delivery: Delivery) -> None:
    """The next attempt at the delivery's `next_attempt_at`, by RQ's scheduler (which keeps
    whole seconds: a second later, so that the job never finds it not due yet)."""
    django_rq.get_queue(QUEUE).enqueue_at(
        delivery.next_attempt_at + timedelta(seconds=1),
        deliver_job,
        delivery.pk,
        job_id=_job_id(delivery),
        job_timeout=300,
        failure_ttl=7 * 24 * 3600,
    )


def _job_id(delivery: Delivery) -> str:
    return f"notify-{delivery.pk}-{delivery.attempts + 1}"


def check_agreement_soon(task_id: int) -> None:
    """Check the task's judge agreement after this transaction, unless a check is waiting."""
    try:
        claimed = django_rq.get_connection(QUEUE).set(
            AGREEMENT_CLAIM.format(task_id=task_id), "1", nx=True, ex=AGREEMENT_CLAIM_SECONDS
        )
    except redis.RedisError:
        logger.warning("notifications: Redis is away; agreement of task %s not checked", task_id)
        return
    if claimed:
        enqueue(check_agreement_job, task_id, queue=QUEUE)


def check_agreement_job(task_id: int) -> str:
    """Tell the task's project of each alarm of its default judge's agreement with people
    (once per judge version, subject and week)."""
    django_rq.get_connection(QUEUE).delete(AGREEMENT_CLAIM.format(task_id=task_id))
    task = Task.objects.select_related("project").filter(pk=task_id).first()
    if task is None:
        return "no task"
    made = []
    for alarm in alarms(task):
        made += notices.agreement_alarm(task, alarm)
    start(made)
    return f"{len(made)} deliveries"
