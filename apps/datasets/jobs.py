"""Background imports of the datasets app: starting one, its job (a function of ids, safe to
run twice), and telling when its worker died."""

import logging
from pathlib import Path
from typing import Any

import django_rq
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from apps.datasets.importing import (
    Mapping,
    clear_progress,
    fill_dataset_from_file,
    import_dataset,
    progress_reporter,
)
from apps.datasets.models import Dataset, Task
from apps.datasets.perturb import PerturbError, check_perturbation, perturb_dataset
from apps.datasets.readers import DatasetError
from apps.datasets.uploads import StagedUpload
from evalsite.enqueue import enqueue

log = logging.getLogger(__name__)


def import_job_id(dataset_id: int) -> str:
    return f"import-dataset-{dataset_id}"


def import_dataset_job(dataset_id: int) -> None:
    """Import the staged file of an importing dataset: all its items, or none and an error."""
    dataset = Dataset.objects.select_related("task").filter(pk=dataset_id).first()
    if dataset is None or not dataset.is_importing:
        return  # deleted meanwhile, or a second run of a job that already finished
    path = Path(dataset.upload_path) if dataset.upload_path else None
    try:
        if path is None:
            raise DatasetError("The uploaded file is gone; upload it again.")
        report = progress_reporter(dataset_id)
        report("reading", 0, 0)
        fill_dataset_from_file(dataset, path, Mapping.from_dict(dataset.mapping), report)
    except DatasetError as exc:
        dataset.mark_failed(str(exc))
    except Exception as exc:
        # Unexpected: say so on the page, and re-raise so the worker keeps the traceback.
        dataset.mark_failed(f"The import stopped on an unexpected error ({type(exc).__name__}).")
        raise
    finally:
        clear_progress(dataset_id)
        if path is not None:
            path.unlink(missing_ok=True)
            path.with_suffix(".json").unlink(missing_ok=True)


def start_background_import(
    task: Task,
    name: str,
    path: Path,
    mapping: Mapping,
    fmt: str,
    columns: list[str],
    user: Any = None,
    file_name: str = "",
    sheet: str = "",
) -> Dataset:
    """Create the dataset as importing and hand `path` to a worker (enqueued after commit)."""
    name = name.strip()
    if not name:
        raise DatasetError("Give the dataset a name.")
    checked = mapping.validated(columns, sheet)
    with transaction.atomic():
        dataset = Dataset.objects.new_version(
            task,
            name,
            format=fmt,
            sheet=sheet,
            file_name=file_name[:255],
            columns=columns,
            mapping=checked.to_dict(),
            upload_path=str(path),
            created_by=user if getattr(user, "pk", None) else None,
        )
        enqueue(import_dataset_job, dataset.pk, queue="imports", job_id=import_job_id(dataset.pk))
    return dataset


def import_staged(
    task: Task, staged: StagedUpload, name: str, mapping: Mapping, user: Any = None
) -> Dataset:
    """Import a staged upload: here if it is small, else in a worker (the dataset is then
    returned still importing). The page and the API both end an upload with this.

    Raises DatasetError (nothing stored, the staged file kept for another try).
    """
    fmt = staged.meta["format"]
    if staged.imports_in_background:
        columns = staged.meta["columns"]
        dataset = start_background_import(
            task, name, staged.path, mapping, fmt, columns, user, staged.file_name, staged.sheet
        )
        staged.hand_over()
        return dataset
    dataset = import_dataset(
        task, name, staged.path, mapping, fmt, user, staged.file_name, staged.sheet or None
    )
    staged.discard()
    return dataset


def perturb_job_id(dataset_id: int, name: str, seed: int) -> str:
    return f"perturb-dataset-{dataset_id}-{name}-{seed}"


def perturb_dataset_job(dataset_id: int, name: str, seed: int, user_id: int | None) -> None:
    """Make a perturbed copy of a big dataset in a worker. Safe to run twice: the second run
    finds the copy the first made (`perturb_dataset` returns it)."""
    original = Dataset.objects.select_related("task").filter(pk=dataset_id).first()
    if original is None:
        return
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    try:
        perturb_dataset(original, name, seed, user)
    except PerturbError as exc:
        log.warning("%s not perturbed (%s, seed %s): %s", original, name, seed, exc)


def start_background_perturb(original: Dataset, name: str, seed: int, user: Any = None) -> str:
    """Check what can be checked now, then hand the copy to a worker (after commit)."""
    check_perturbation(name)
    if original.status != Dataset.Status.READY:
        raise PerturbError(f"{original} is not ready: only a finished import can be perturbed.")
    user_id = getattr(user, "pk", None)
    return enqueue(
        perturb_dataset_job,
        original.pk,
        name,
        seed,
        user_id,
        queue="imports",
        job_id=perturb_job_id(original.pk, name, seed),
    )


def import_job_lost(dataset: Dataset, grace_seconds: int = 120) -> bool:
    """True when an importing dataset's job is no longer queued or running (its worker died)."""
    if not dataset.is_importing:
        return False
    try:
        job = Job.fetch(import_job_id(dataset.pk), connection=django_rq.get_connection("default"))
        status = job.get_status()
    except NoSuchJobError:
        age = (timezone.now() - dataset.created_at).total_seconds()
        return age > grace_seconds
    except Exception:
        return False
    return status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED)
