"""Enqueueing background jobs, for every app: after commit (or at once where no transaction can
be open), always with our own job id, on the queue of its kind of work."""

import uuid
from collections.abc import Callable
from typing import Any, Literal

import django_rq
from django.db import transaction

# The queues of settings.RQ_QUEUES, by kind of work (a worker serves them in that order):
# dataset imports and perturbed copies; batch polls; run chunks and batch submits; the rest.
Queue = Literal["imports", "polls", "runs", "default"]


def enqueue(
    func: Callable[..., Any] | str,
    *args: Any,
    queue: Queue,
    job_id: str | None = None,
    timeout: int = 3600,
) -> str:
    """Enqueue `func(*args)` once the current transaction commits; return the job id.

    The job reads rows this transaction writes, so it must not start before the commit.
    Our own id lets callers find the job even though django-rq's enqueue returns None here.
    `func` may be a dotted path, for a module that cannot import the job's own.
    """
    job_id = job_id or f"{getattr(func, '__name__', func)}-{uuid.uuid4().hex}"
    transaction.on_commit(
        lambda: enqueue_now(func, *args, queue=queue, job_id=job_id, timeout=timeout)
    )
    return job_id


def enqueue_now(
    func: Callable[..., Any] | str,
    *args: Any,
    queue: Queue,
    job_id: str,
    timeout: int = 3600,
) -> None:
    """Enqueue at once: for callers outside any transaction (the runs watchdog thread)."""
    django_rq.get_queue(queue).enqueue(
        func,  # type: ignore[type-var]  # RQ takes a dotted path as well as a function
        *args,
        job_id=job_id,
        job_timeout=timeout,
        failure_ttl=7 * 24 * 3600,
    )
