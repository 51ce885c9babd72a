"""Making and relaunching judge runs: the API that views, commands and auto-judging call.

The judging itself (what a unit is, how rounds are asked and scored and written) is the judge
run plug-in in apps/judges/judging.py; this module only creates runs and starts launches.
"""

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.datasets.models import Dataset
from apps.judges.models import Judge, JudgeRun, RetryScope, Score
from apps.judges.scoring import JudgeSpec
from apps.runs.engine.budget import check_budget
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.models import Endpoint, LoggingMode, Run


class JudgeRunError(ValueError):
    """A judge run that cannot be made as asked; the message says why in plain words."""


def parse_responses(value: str) -> tuple[Run | None, Dataset, str]:
    """`RUN_ID` or `DATASET:COLUMN` (a dataset id, or a name: its latest version)."""
    value = value.strip()
    if value.isdigit():
        run = Run.objects.select_related("dataset__task").filter(pk=int(value)).first()
        if run is None:
            raise JudgeRunError(f"No run with id {value}.")
        return run, run.dataset, ""
    name, sep, column = value.partition(":")
    if not sep or not name or not column:
        raise JudgeRunError(
            f"--responses {value!r}: give a generation run id, or DATASET:COLUMN "
            "(for example 12:response or support-answers:response)."
        )
    if name.isdigit():
        dataset = Dataset.objects.select_related("task").filter(pk=int(name)).first()
        if dataset is None:
            raise JudgeRunError(f"No dataset with id {name}.")
        return None, dataset, column
    latest = {}
    # A draft (a generated dataset not yet reviewed, or discarded) is never the latest
    # version to judge.
    named = (
        Dataset.objects.select_related("task")
        .filter(name=name)
        .exclude(status__in=[Dataset.Status.DRAFT, Dataset.Status.DISCARDED])
    )
    for dataset in named.order_by("version"):
        latest[dataset.task_id] = dataset
    if not latest:
        raise JudgeRunError(f"No dataset named {name!r}.")
    if len(latest) > 1:
        tasks = ", ".join(sorted(d.task.slug for d in latest.values()))
        raise JudgeRunError(
            f"Datasets named {name!r} exist in several tasks ({tasks}); give the dataset id."
        )
    return None, next(iter(latest.values())), column


def find_judge(task_id: int, name: str, version: int | None = None) -> Judge:
    judges = Judge.objects.filter(task_id=task_id, name=name)
    if version:
        judges = judges.filter(version=version)
    judge = judges.order_by("-version").first()
    if judge is None:
        names = ", ".join(
            sorted(set(Judge.objects.filter(task_id=task_id).values_list("name", flat=True)))
        )
        at = f" at version {version}" if version else ""
        raise JudgeRunError(
            f"No judge {name!r}{at} in this task (there are: {names or 'none yet'})."
        )
    return judge


def check_source(
    judge: Judge, source_run: Run | None, dataset: Dataset | None, source_column: str
) -> Dataset:
    """The dataset whose items are judged; JudgeRunError when the source does not fit."""
    if judge.kind == Judge.Kind.IMPORTED:
        raise JudgeRunError(
            f"{judge} holds scores imported from another tool; it cannot judge anything again."
        )
    if source_run is not None:
        if source_column:
            raise JudgeRunError("Judge either a generation run or a dataset column, not both.")
        if source_run.kind not in Run.JUDGEABLE_KINDS:
            raise JudgeRunError(f"Run #{source_run.pk} is not a generation run.")
        if judge.kind == Judge.Kind.CHOICE and source_run.kind != Run.Kind.CHOICE:
            raise JudgeRunError(
                f"{judge} scores choice-scoring runs only; run #{source_run.pk} is a "
                f"{source_run.get_kind_display().lower()} run."
            )
        if source_run.task_id != judge.task_id:
            raise JudgeRunError(f"Run #{source_run.pk} belongs to another task than {judge}.")
        return source_run.dataset
    if judge.kind == Judge.Kind.CHOICE:
        raise JudgeRunError(f"{judge} scores choice-scoring runs, not a dataset column.")
    if dataset is None or not source_column:
        raise JudgeRunError("Say what to judge: a generation run, or a dataset and its column.")
    if dataset.task_id != judge.task_id:
        raise JudgeRunError(f"Dataset {dataset} belongs to another task than {judge}.")
    if dataset.is_draft:
        raise JudgeRunError(
            f"Dataset {dataset} is a draft: review and publish its items before judging it."
        )
    if dataset.status != Dataset.Status.READY:
        raise JudgeRunError(f"Dataset {dataset} is not ready ({dataset.get_status_display()}).")
    if source_column not in dataset.columns:
        known = ", ".join(dataset.response_columns or dataset.columns) or "none"
        raise JudgeRunError(
            f"Dataset {dataset} has no column {source_column!r} (response columns: {known})."
        )
    return dataset


def create_judge_run(
    judge: Judge,
    *,
    endpoint: Endpoint | None = None,
    source_run: Run | None = None,
    dataset: Dataset | None = None,
    source_column: str = "",
    user: Any = None,
    label: str = "",
    logging_mode: str = LoggingMode.FAILED,
    chunk_size: int = 200,
    batch: bool = False,
    use_cache: bool | None = None,
    budget_usd: Any = None,
) -> Run:
    """A new judge run, launched (its jobs are enqueued when the transaction commits);
    `batch` sends its requests through the provider's Batch API (apps.runs.engine.batch). Judges
    reuse cached replies unless `use_cache` is False."""
    dataset = check_source(judge, source_run, dataset, source_column)
    try:
        JudgeSpec.of(judge).check()
    except ValueError as exc:
        raise JudgeRunError(f"Judge {judge} cannot run: {exc}") from None
    if judge.uses_llm and endpoint is None:
        raise JudgeRunError(f"{judge} is an LLM judge: choose the endpoint that judges.")
    if batch and not judge.uses_llm:
        raise JudgeRunError(f"{judge} asks no model: batch mode is for LLM judges.")
    if batch and endpoint is not None and (refusal := endpoint.batch_refusal()):
        raise JudgeRunError(refusal)
    budget = _budget(budget_usd, endpoint if judge.uses_llm else None)
    if batch and budget is not None:
        raise JudgeRunError("A budget cannot stop a batch: leave one of them out.")
    with transaction.atomic():
        run = JudgeRun.create_with(
            judge,
            task_id=judge.task_id,
            kind=Run.Kind.JUDGE,
            dataset=dataset,
            endpoint=endpoint if judge.uses_llm else None,
            source_run=source_run,
            source_column=source_column if source_run is None else "",
            label=label,
            logging_mode=logging_mode,
            chunk_size=max(1, chunk_size),
            batch=batch,
            use_cache=use_cache is not False,
            budget_usd=budget,
            total=dataset.items.count(),
            created_by=user if getattr(user, "pk", None) else None,
        )
        launch(run, Run.Mode.RESUME)
    return run


def _budget(budget_usd: Any, endpoint: Endpoint | None) -> Any:
    try:
        return check_budget(budget_usd, endpoint)
    except ValueError as exc:
        raise JudgeRunError(str(exc)) from None


def retry_items(run: Run, item_ids: Iterable[int]) -> int:
    """Judge again the failed rounds of these items only; returns how many items are queued.

    Raises LaunchError when the run is still going.
    """
    ids = sorted({int(pk) for pk in item_ids})
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.kind != Run.Kind.JUDGE:
            raise LaunchError(f"Run #{run.pk} is not a judge run.")
        if locked.is_active and not locked.is_stalled and locked.launch > 0:
            raise LaunchError("This run is still going; cancel it first or wait for it to end.")
        # launch() starts launch + 1 under the same lock: the scope names that launch.
        RetryScope.objects.update_or_create(
            run=locked, launch=locked.launch + 1, defaults={"item_ids": ids}
        )
        count = launch(run, Run.Mode.RETRY_FAILED)
    return count


def retry_all_failed(run: Run) -> int:
    with transaction.atomic():
        return launch(run, Run.Mode.RETRY_FAILED)


def retry_kind(run: Run, error_kind: str) -> int:
    """Judge again the failed items of one error kind (those that judging again may fix);
    returns how many are queued. Raises LaunchError when the run is still going."""
    ids = list(
        Score.objects.filter(run_id=run.pk, error_kind=error_kind)
        .retryable(run)
        .values_list("item_id", flat=True)
        .distinct()
    )
    return retry_items(run, ids) if ids else 0


def retry_failed_items(run_id: int, item_ids: Iterable[int]) -> int:
    """Judge again the failed rounds of these items of a judge run (the review list's "retry");
    returns how many items were queued (items that are not failed are left alone)."""
    run = Run.objects.filter(pk=run_id, kind=Run.Kind.JUDGE).first()
    if run is None:
        raise ValidationError(f"Run #{run_id} is not a judge run.")
    try:
        return retry_items(run, item_ids)
    except LaunchError as exc:
        raise ValidationError(str(exc)) from None
