"""Queues by kind of work: an upload's import is not held up behind a long run's chunks."""

import django_rq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.datasets.models import Dataset
from apps.runs.models import Run
from tests.base import run_burst_worker, work
from tests.datasets import samples
from tests.factories import make_qa_dataset

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_upload_is_imported_before_the_chunks_of_a_run_queued_earlier(
    start, task, endpoint, reviewer_client, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.DATASET_SYNC_MAX_ROWS = 10
    run = start(dataset=make_qa_dataset(task, 120, name="long"), chunk_size=10)
    chunks = django_rq.get_queue("runs").job_ids
    assert len(chunks) > 1 and all(c.startswith(f"run-{run.pk}-") for c in chunks), chunks

    # Queued after the run: with one queue for all work, a worker would take a chunk first.
    response = reviewer_client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile("new.csv", samples.numbered_csv(40))},
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    response = reviewer_client.post(response["Location"], {"name": "new", "format": "csv"})
    assert response.status_code == 302, response.content.decode()[-3000:]
    uploaded = Dataset.objects.get(name="new")
    assert uploaded.status == Dataset.Status.IMPORTING
    assert django_rq.get_queue("imports").job_ids == [f"import-dataset-{uploaded.pk}"]

    # A worker of every queue, as bin/run starts it, allowed one job: it takes the import.
    result = run_burst_worker(options=("--max-jobs", "1"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    uploaded.refresh_from_db()
    assert (uploaded.status, uploaded.row_count) == (Dataset.Status.READY, 40)
    assert django_rq.get_queue("runs").job_ids == chunks  # not one chunk taken yet
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.QUEUED, 0)

    work()  # and the run's queue is served too
    run.refresh_from_db()
    assert (run.status, run.done, run.total) == (Run.Status.COMPLETED, 120, 120), run.error
