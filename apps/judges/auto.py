"""Evaluate every model: a task's default judge judges each new response set by itself.

Receives `run_finished` (a generation run finished) and `dataset_imported` (an uploaded file with
response columns is stored); the judges app connects them in its `ready()`. Never raises: a
response set that cannot be judged automatically is logged and left for a person to start.

A choice-scoring run (apps/runs/kinds/choices.py) is judged by the task's log-likelihood choice judge
(`CHOICE_JUDGE`, made here the first time, rule-based: no endpoint), which puts accuracy and
length-normalised accuracy on the board, and by the default judge too when that is the
rule-based multiple-choice judge (it reads the raw pick like any answer).
"""

import logging
from typing import Any

from django.db import transaction

from apps.datasets.models import Dataset, Task
from apps.judges.judging import NOTHING_TO_JUDGE
from apps.judges.launching import JudgeRunError, create_judge_run, retry_items
from apps.judges.models import (
    CHOICE_JUDGE,
    CHOICE_SUBJECTS,
    Judge,
    Score,
    TaskJudging,
    runs_of,
)
from apps.runs.engine.launch import LaunchError
from apps.runs.models import Response, Run

log = logging.getLogger(__name__)


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    """`run_finished`: a task with a default judge judges each finished generation run."""
    if run.kind in Run.JUDGEABLE_KINDS:
        judge_new_response_sets(run=run)


def on_dataset_imported(sender: Any, dataset: Dataset, **kwargs: Any) -> list[str]:
    """`dataset_imported`: ... and each response column of an uploaded dataset, unless the
    file is an earlier version uploaded again unchanged (its answers were judged there).
    Names the judge runs started, for the upload's message."""
    try:
        if dataset.unchanged_from() is not None:
            return []
    except Exception:
        log.exception("could not compare %s with its earlier versions", dataset)
    return [str(run) for run in judge_new_response_sets(dataset=dataset)]


def judge_new_response_sets(*, dataset: Dataset | None = None, run: Run | None = None) -> list[Run]:
    """Start the task's default judge on a finished generation run, or on every response
    column of a freshly imported dataset; returns the judge runs started (or relaunched)."""
    try:
        if run is not None and run.kind == Run.Kind.CHOICE:
            return _judge_choice_run(run)
        if run is not None:
            started = _judge_generation_run(run)
            return [started] if started else []
        if dataset is not None:
            return _judge_dataset(dataset)
    except Exception:
        log.exception("auto-judging failed (run=%s, dataset=%s)", run, dataset)
    return []


def _default(task: Task) -> tuple[Judge, Any] | None:
    judging = TaskJudging.of(task.pk)
    judge = judging.default_judge
    if judge is None:
        return None
    endpoint = judging.default_judge_endpoint if judge.uses_llm else None
    if judge.uses_llm and endpoint is None:
        log.warning("task %s: default judge %s has no endpoint; not judging", task, judge)
        return None
    return judge, endpoint


def _judge_generation_run(run: Run) -> Run | None:
    run = Run.objects.select_related("task").get(pk=run.pk)
    # Memory scripts and simulated users answer items too (a choice run is judged above).
    if run.kind not in (Run.Kind.GENERATION, Run.Kind.SCRIPT, Run.Kind.SIMULATION):
        return None
    default = _default(run.task)
    if default is None:
        return None
    return _judge_with(run, *default)


def choice_judge(task: Task) -> Judge:
    """The task's log-likelihood choice judge (its latest version), made when missing."""
    judge = (
        Judge.objects.filter(task=task, name=CHOICE_JUDGE, kind=Judge.Kind.CHOICE)
        .order_by("-version")
        .first()
    )
    if judge is None:
        judge, _ = Judge.objects.get_or_create(
            task=task,
            name=CHOICE_JUDGE,
            version=1,
            defaults={"kind": Judge.Kind.CHOICE, "subjects": [dict(s) for s in CHOICE_SUBJECTS]},
        )
    return judge


def _judge_choice_run(run: Run) -> list[Run]:
    run = Run.objects.select_related("task").get(pk=run.pk)
    started = [_judge_with(run, choice_judge(run.task), None)]
    default = TaskJudging.of(run.task_id).default_judge
    if default is not None and default.kind == Judge.Kind.MCQ_RULE:
        started.append(_judge_with(run, default, None))
    return [judge_run for judge_run in started if judge_run is not None]


def _judge_with(run: Run, judge: Judge, endpoint: Any) -> Run | None:
    """A judge run of `judge` on `run`, or the earlier one relaunched on what it lacked."""
    existing = runs_of(judge).judging().filter(source_run=run).order_by("-pk").first()
    if existing is not None:
        return _rejudge_answered(existing)
    try:
        return create_judge_run(judge, endpoint=endpoint, source_run=run, user=run.created_by)
    except JudgeRunError as exc:
        log.warning("run #%s: not judged automatically: %s", run.pk, exc)
        return None


def _rejudge_answered(judge_run: Run) -> Run | None:
    """The generation run finished again (resume, retry failed): judge the items that had
    nothing to judge before and have an answer now."""
    if judge_run.is_active or judge_run.source_run_id is None:
        return None
    source = Response.objects.filter(run_id=judge_run.source_run_id)
    answered = source.answered_items(judge_run.judged_epochs)
    ids = list(
        Score.objects.filter(
            run=judge_run,
            status=Score.Status.FAILED,
            error__startswith=NOTHING_TO_JUDGE,
            item_id__in=answered,
        )
        .values_list("item_id", flat=True)
        .distinct()
    )
    if not ids:
        return None
    try:
        retry_items(judge_run, ids)
    except LaunchError as exc:
        log.warning("judge run #%s: not relaunched: %s", judge_run.pk, exc)
        return None
    return judge_run


def _judge_dataset(dataset: Dataset) -> list[Run]:
    dataset = Dataset.objects.select_related("task").get(pk=dataset.pk)
    if dataset.status != Dataset.Status.READY or not dataset.response_columns:
        return []
    default = _default(dataset.task)
    if default is None:
        return []
    judge, endpoint = default
    started = []
    for column in dataset.response_columns:
        if runs_of(judge).judging().filter(dataset=dataset, source_column=column).exists():
            continue
        try:
            with transaction.atomic():
                started.append(
                    create_judge_run(
                        judge,
                        endpoint=endpoint,
                        dataset=dataset,
                        source_column=column,
                        user=dataset.created_by,
                    )
                )
        except JudgeRunError as exc:
            log.warning("dataset %s column %s: not judged automatically: %s", dataset, column, exc)
    return started
