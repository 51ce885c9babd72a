"""Evaluate every model on new data (Dynabench): a task with `Task.evaluate_new_data` answers
each dataset (or version) that becomes ready in it with a generation run per (endpoint,
template) pair that has a finished generation run in the task; the task's default judge then
judges each of them when it finishes (apps/judges/auto.py reacts to `run_finished`).

Receives `dataset_imported`, sent after the commit of whatever made the dataset ready (an
upload, a perturbed copy, a published generated dataset). Never raises into the import: a pair
that cannot start is logged and left for a person.
"""

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.datasets.models import Dataset
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import Run
from apps.runs.prompts import fits

log = logging.getLogger(__name__)

FINISHED = (Run.Status.COMPLETED, Run.Status.COMPLETED_WITH_FAILURES)


@dataclass(frozen=True)
class Model:
    """An (endpoint, template version) pair, as its latest finished run ran it."""

    endpoint_id: int
    template_id: int
    run: Run  # the latest finished generation run of the pair: its label and settings


def models_of(task_id: int) -> list[Model]:
    """Every (endpoint, template version) pair with a finished generation run in the task,
    with its latest such run, in the order the task met them (the first run of each)."""
    runs = (
        Run.objects.generation()
        .filter(
            task_id=task_id, status__in=FINISHED, endpoint__isnull=False, template__isnull=False
        )
        .select_related("endpoint", "template")
        .order_by("pk")
    )
    latest: dict[tuple[int, int], Run] = {}  # dicts keep the order keys first came in
    for run in runs:
        assert run.endpoint_id is not None and run.template_id is not None
        latest[(run.endpoint_id, run.template_id)] = run
    return [Model(endpoint, template, run) for (endpoint, template), run in latest.items()]


def on_dataset_imported(sender: Any, dataset: Dataset, **kwargs: Any) -> list[str]:
    """`dataset_imported`: start the task's models on the new data if the task asks for it;
    names the runs started, for the upload's message."""
    return [str(run) for run in evaluate_new_data(dataset)]


def evaluate_new_data(dataset: Dataset) -> list[Run]:
    """Start a generation run over `dataset` for each of its task's models that has none there
    yet; returns the runs started. Nothing for a task without the option, a dataset that is
    not ready, or one whose items are an earlier version's uploaded again unchanged."""
    try:
        dataset = Dataset.objects.select_related("task").get(pk=dataset.pk)
        if not dataset.task.evaluate_new_data or dataset.status != Dataset.Status.READY:
            return []
        if (same := dataset.unchanged_from()) is not None:
            log.info("%s has the same items as %s: no runs started", dataset, same)
            return []
        return [run for model in models_of(dataset.task_id) if (run := _start(dataset, model))]
    except Exception:
        log.exception("evaluating every model on %s failed", dataset)
        return []


def _start(dataset: Dataset, model: Model) -> Run | None:
    previous = model.run
    assert previous.endpoint is not None and previous.template is not None
    if not fits(previous.template, dataset):
        log.warning(
            "%s: template %s uses fields the dataset does not have; %s not started",
            dataset,
            previous.template,
            previous.label,
        )
        return None
    try:
        with transaction.atomic():
            # The dataset row locked: the signal sent twice (a job run twice) starts one run.
            Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
            exists = Run.objects.generation().filter(
                dataset=dataset, endpoint_id=model.endpoint_id, template_id=model.template_id
            )
            if exists.exists():
                return None
            return create_generation_run(
                dataset,
                previous.endpoint,
                previous.template,
                user=dataset.created_by,
                label=previous.label,
                logging_mode=previous.logging_mode,
                chunk_size=previous.chunk_size,
                epochs=previous.epochs,
            )
    except Exception:
        log.exception("%s: %s not started", dataset, previous.label)
        return None
