"""Background jobs of the datasets app: functions of ids, safe to run twice."""

import logging
from pathlib import Path

from apps.datasets.importing import (
    Mapping,
    clear_progress,
    fill_dataset,
    progress_reporter,
)
from apps.datasets.models import Dataset
from apps.datasets.readers import DatasetError, read_table

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
        table = read_table(path, dataset.format, dataset.file_name)
        fill_dataset(dataset, table, Mapping.from_dict(dataset.mapping), report)
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
