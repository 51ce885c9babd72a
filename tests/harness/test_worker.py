"""A job enqueued from a view runs on the real Redis through a real worker process."""

import django_rq
import pytest
from django.urls import reverse

from apps.runs.models import WorkerCheck
from tests.base import run_burst_worker


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_view_enqueues_a_job_that_a_real_worker_runs(reviewer_client):
    response = reviewer_client.post(reverse("runs:check-worker"))
    assert response.status_code == 302
    check = WorkerCheck.objects.get()
    assert check.completed_at is None

    queue = django_rq.get_queue("default")
    job_id = f"worker-check-{check.pk}"
    assert job_id in queue.job_ids  # enqueued after commit, under our own id

    result = run_burst_worker()
    assert result.returncode == 0, result.stdout + result.stderr

    check.refresh_from_db()
    assert check.completed_at is not None
    assert check.worker
    assert queue.count == 0
    page = reviewer_client.get(reverse("runs:system")).content.decode()
    assert check.worker in page


@pytest.mark.django_db
def test_nothing_is_enqueued_when_the_transaction_rolls_back(reviewer_user):
    from django.db import transaction

    from apps.runs import jobs
    from evalsite.enqueue import enqueue

    queue = django_rq.get_queue("default")
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue(jobs.check_worker, 1, job_id="never")
        raise RuntimeError("rolled back")
    assert "never" not in queue.job_ids
