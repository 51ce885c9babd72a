"""Large uploads import in a real RQ worker, atomically, with progress on the dataset page."""

from datetime import timedelta
from pathlib import Path

import django_rq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from apps.datasets import importing, jobs, uploads
from apps.datasets.importing import Mapping, import_progress, progress_reporter
from apps.datasets.jobs import import_job_lost, start_background_import
from apps.datasets.models import Dataset, Item
from tests.base import run_burst_worker
from tests.datasets import samples

HTMX_POLL = {"HX-Request": "true", "HX-Target": "import-progress"}


def upload_and_map(client, task, data: bytes, file_name: str, **mapping) -> tuple[Dataset, str]:
    response = client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile(file_name, data)},
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    url = response["Location"]
    response = client.post(url, {"name": "big", "format": "csv", **mapping})
    assert response.status_code == 302, response.content.decode()[-3000:]
    return Dataset.objects.get(), url


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_large_upload_is_imported_by_a_real_worker(reviewer_client, task, settings, staged_files):
    settings.DATASET_SYNC_MAX_ROWS = 10
    dataset, map_url = upload_and_map(
        reviewer_client,
        task,
        samples.numbered_csv(40),
        "big.csv",
        id_column="id",
        tags_column="tags",
    )
    assert dataset.status == "importing" and dataset.items.count() == 0
    assert Path(dataset.upload_path).exists()
    assert staged_files() == [Path(dataset.upload_path)]  # handed over: its note is gone...
    again = reviewer_client.post(map_url, {"name": "big", "format": "csv"}, follow=True)
    assert "no longer here" in again.content.decode()  # ...so a second submit cannot re-import
    assert Dataset.objects.count() == 1
    queue = django_rq.get_queue("imports")
    assert f"import-dataset-{dataset.pk}" in queue.job_ids  # enqueued after commit, our own id

    page = reviewer_client.get(dataset.get_absolute_url()).content.decode()
    assert 'id="import-progress"' in page and 'hx-trigger="every 2s"' in page
    poll = reviewer_client.get(dataset.get_absolute_url(), headers=HTMX_POLL)
    assert poll.content.decode().lstrip().startswith('<section class="card" id="import-progress"')
    assert "Waiting for a worker" in poll.content.decode()

    result = run_burst_worker()
    assert result.returncode == 0, result.stdout + result.stderr

    dataset.refresh_from_db()
    assert (dataset.status, dataset.row_count, dataset.progress) == ("ready", 40, 40)
    assert dataset.items.count() == 40 and dataset.tag_counts == {
        "math": 20,
        "history": 20,
        "hard": 20,
    }
    assert dataset.upload_path == "" and staged_files() == []
    # The next poll tells the page to reload; the reloaded page polls no more.
    assert (
        reviewer_client.get(dataset.get_absolute_url(), headers=HTMX_POLL)["HX-Refresh"] == "true"
    )
    page = reviewer_client.get(dataset.get_absolute_url()).content.decode()
    assert "every 2s" not in page and "q0000" in page and "q0039" in page
    task.refresh_from_db()
    assert task.last_mapping["id_column"] == "id"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_error_found_by_the_worker_fails_the_dataset_and_stores_no_items(
    reviewer_client, task, settings, staged_files
):
    settings.DATASET_SYNC_MAX_ROWS = 10
    rows = [[f"id{i % 30}", f"text {i}"] for i in range(40)]  # ids repeat from row 32 on
    dataset, _ = upload_and_map(
        reviewer_client, task, samples.csv_bytes(["id", "text"], rows), "dups.csv", id_column="id"
    )
    result = run_burst_worker()
    assert result.returncode == 0, result.stdout + result.stderr
    dataset.refresh_from_db()
    assert dataset.status == "failed"
    assert dataset.error.startswith("The id 'id0' in column 'id' appears 2 times: row 2, row 32.")
    assert Item.objects.count() == 0 and staged_files() == []
    page = reviewer_client.get(dataset.get_absolute_url()).content.decode()
    assert "The import failed" in page and "appears 2 times: row 2, row 32." in page
    assert "every 2s" not in page and 'id="item-browser"' not in page


@pytest.mark.django_db
def test_the_job_is_safe_to_run_twice(task, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(samples.numbered_csv(30))
    dataset = start_background_import(
        task, "twice", path, Mapping(id_column="id"), "csv", ["id", "question", "answer", "tags"]
    )
    jobs.import_dataset_job(dataset.pk)
    jobs.import_dataset_job(dataset.pk)  # already ready: nothing happens
    dataset.refresh_from_db()
    assert dataset.status == "ready" and Item.objects.count() == 30
    assert not path.exists()
    jobs.import_dataset_job(999_999)  # a deleted dataset: nothing happens


@pytest.mark.django_db
def test_an_unexpected_error_mid_write_rolls_back_every_item(task, tmp_path, monkeypatch):
    path = tmp_path / "rows.csv"
    path.write_bytes(samples.numbered_csv(50))
    dataset = start_background_import(
        task, "crash", path, Mapping(id_column="id"), "csv", ["id", "question", "answer", "tags"]
    )
    monkeypatch.setattr(importing, "WRITE_BATCH", 10)
    written = []

    def report(stage: str, done: int, total: int) -> None:
        written.append(done)
        if done == 30:
            raise MemoryError("worker ran out of memory")

    monkeypatch.setattr(jobs, "progress_reporter", lambda dataset_id: report)
    with pytest.raises(MemoryError):
        jobs.import_dataset_job(dataset.pk)
    assert 30 in written  # three batches were inserted before the crash...
    dataset.refresh_from_db()
    assert dataset.status == "failed" and "unexpected error (MemoryError)" in dataset.error
    assert Item.objects.count() == 0  # ...and none of them remain
    assert not path.exists()


@pytest.mark.django_db
def test_progress_is_read_from_redis_while_importing(reviewer_client, task, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(samples.numbered_csv(40))
    dataset = start_background_import(
        task, "p", path, Mapping(), "csv", ["id", "question", "answer", "tags"]
    )
    progress_reporter(dataset.pk)("writing", 20, 40)
    assert import_progress(dataset) == {"stage": "writing", "done": 20, "total": 40, "percent": 60}
    poll = reviewer_client.get(dataset.get_absolute_url(), headers=HTMX_POLL).content.decode()
    assert "Writing items: 20 of 40" in poll and 'aria-valuenow="60"' in poll


@pytest.mark.django_db
def test_a_lost_import_job_is_reported_and_polling_stops(reviewer_client, task, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(samples.numbered_csv(5))
    dataset = start_background_import(task, "lost", path, Mapping(), "csv", ["id"])
    assert not import_job_lost(dataset)  # just created: its job may not be queued yet
    Dataset.objects.filter(pk=dataset.pk).update(created_at=timezone.now() - timedelta(hours=1))
    dataset.refresh_from_db()
    assert import_job_lost(dataset)  # nothing in Redis under its job id
    page = reviewer_client.get(dataset.get_absolute_url()).content.decode()
    assert "no longer running" in page and "every 2s" not in page


@pytest.mark.django_db
def test_a_big_file_is_previewed_in_part_and_checked_whole_by_the_job(
    reviewer_client, task, monkeypatch, staged_files
):
    monkeypatch.setattr(uploads, "PREVIEW_BYTES", 2000)
    rows = [[f"id{i}", f"text {i}"] for i in range(300)]
    late_duplicate = samples.csv_bytes(["id", "text"], [*rows, ["id5", "again"]])
    response = reviewer_client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile("big.csv", late_duplicate)},
    )
    preview = reviewer_client.get(response["Location"]).content.decode()
    assert 'id="partial-read"' in preview and "Import the whole file" in preview
    assert "the import reads and checks every row" in preview
    reviewer_client.post(response["Location"], {"name": "big", "format": "csv", "id_column": "id"})
    dataset = Dataset.objects.get()
    assert dataset.is_importing  # 301 rows is below the sync limit, but only the worker counts
    jobs.import_dataset_job(dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == "failed" and Item.objects.count() == 0
    assert "The id 'id5' in column 'id' appears 2 times: row 7, row 302." in dataset.error
    assert staged_files() == []

    response = reviewer_client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile("big.csv", samples.csv_bytes(["id", "text"], rows))},
    )
    reviewer_client.post(response["Location"], {"name": "big", "format": "csv", "id_column": "id"})
    fixed = Dataset.objects.get(version=2)
    jobs.import_dataset_job(fixed.pk)
    fixed.refresh_from_db()
    # Version 2, but linked to no previous version: the failed one has nothing to correct.
    assert (fixed.status, fixed.row_count, fixed.previous) == ("ready", 300, None)
