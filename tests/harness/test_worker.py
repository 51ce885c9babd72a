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
        enqueue(jobs.check_worker, 1, queue="default", job_id="never")
        raise RuntimeError("rolled back")
    assert "never" not in queue.job_ids


def test_bin_run_and_the_readme_start_workers_of_every_queue_in_settings_order(settings):
    from tests.base import ROOT

    order = list(settings.RQ_QUEUES)
    assert order[0] == "imports" and order[-1] == "runs"  # uploads first, long chunks last
    script = (ROOT / "bin/run").read_text().splitlines()
    bin_run = [line for line in script if "manage.py rqworker " in line]
    assert len(bin_run) == 1 and f"rqworker {' '.join(order)} --with-scheduler" in bin_run[0]
    readme = (ROOT / "docs/operations.md").read_text()
    assert f"rqworker {' '.join(order)} --with-scheduler" in readme  # another machine's worker
    split = [
        line.split("rqworker ")[1].split("#")[0].split()
        for line in readme.splitlines()
        if "manage.py rqworker" in line
    ]
    served = {name for args in split for name in args if not name.startswith("-")}
    assert served == set(order)  # the per-queue example leaves no queue without a worker
