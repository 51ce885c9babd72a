"""What every importer reads a tool's files into, and how it is stored: the samples as one
dataset, each model's outputs as a generation run (epochs kept), each scorer as a judge of
kind "imported" with a judge run per model, its values as scores that people review and
override like any judge's, its explanations as the rounds' reasons. All of it or nothing."""

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.datasets.importing import import_table
from apps.datasets.models import Item, Task
from apps.datasets.readers import DatasetError, Table
from apps.interop.models import Import, ImportedLog, ImportedRecord
from apps.judges.models import Judge, JudgeRound, JudgeRun, Score
from apps.runs.models import Response, Run


class ImportError_(DatasetError):
    """A file another tool wrote that cannot be imported; the message names the file and the
    sample or row, and nothing is stored."""


@dataclass
class Sample:
    """One item: its id in the tool, the row of the dataset, and where it is in the file."""

    key: str
    row: dict[str, Any]
    where: str


@dataclass
class Answer:
    """One model's answer to one sample in one epoch (0-based), with its scores."""

    key: str
    epoch: int
    text: str
    where: str
    error: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # {scorer: {subject: value or None}} and {scorer: explanation}
    values: dict[str, dict[str, float | None]] = field(default_factory=dict)
    explanations: dict[str, str] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)  # the sample as the tool wrote it


@dataclass
class ModelResults:
    """One model's results: a response set, and the file's own header for the way back."""

    label: str
    file_name: str
    epochs: int
    answers: list[Answer]
    header: dict[str, Any] = field(default_factory=dict)


@dataclass
class Results:
    tool: str
    tool_version: str
    dataset_name: str
    columns: list[str]
    mapping: dict[str, Any]
    samples: list[Sample]
    models: list[ModelResults]
    # {scorer: {subject: (min, max)}}: each scorer's subjects and the range of their values.
    scorers: dict[str, dict[str, tuple[float, float]]]
    file_names: list[str]


def store(task: Task, results: Results, user: Any = None) -> Import:
    """Write `results` into `task` in one transaction; ImportError_ (nothing written) when a
    model answers a sample the dataset lacks or answers it twice."""
    known = {sample.key for sample in results.samples}
    for model in results.models:
        seen: set[tuple[str, int]] = set()
        for answer in model.answers:
            if answer.key not in known:
                raise ImportError_(f"{answer.where}: no sample {answer.key!r} in the dataset.")
            if (answer.key, answer.epoch) in seen:
                raise ImportError_(
                    f"{answer.where}: sample {answer.key!r} epoch {answer.epoch + 1} appears twice."
                )
            seen.add((answer.key, answer.epoch))
    table = Table(
        format="json",
        columns=results.columns,
        rows=[sample.row for sample in results.samples],
        origins=list(range(1, len(results.samples) + 1)),
    )
    owner = user if getattr(user, "pk", None) else None
    with transaction.atomic():
        try:
            dataset = import_table(
                task, results.dataset_name, table, results.mapping, user, results.file_names[0]
            )
        except DatasetError as exc:
            raise ImportError_(f"{', '.join(results.file_names)}: {exc}") from None
        source = Import.objects.create(
            task=task,
            dataset=dataset,
            tool=results.tool,
            tool_version=results.tool_version[:64],
            file_names=results.file_names,
            created_by=owner,
        )
        items = dict(Item.objects.filter(dataset=dataset).values_list("key", "pk"))
        judges = {
            name: _judge(task, results.tool, name, subjects, owner)
            for name, subjects in results.scorers.items()
        }
        for model in results.models:
            run = _response_set(task, dataset, model, items, owner)
            log = ImportedLog.objects.create(
                source=source, run=run, file_name=model.file_name[:255], header=model.header
            )
            ImportedRecord.objects.bulk_create(
                ImportedRecord(
                    log=log,
                    item_id=items[a.key],
                    epoch=a.epoch,
                    position=position,
                    data=a.record,
                )
                for position, a in enumerate(model.answers)
            )
            for name, judge in judges.items():
                _judge_run(judge, run, model, name, items, owner)
    return source


def _judge(
    task: Task, tool: str, scorer: str, subjects: dict[str, tuple[float, float]], user: Any
) -> Judge:
    """The task's imported judge for `scorer`: its latest version when the subjects and
    ranges are the same, else a new version."""
    name = judge_name(tool, scorer)
    wanted = [{"name": s, "min": lo, "max": hi} for s, (lo, hi) in subjects.items()]
    latest = Judge.objects.filter(task=task, name=name).order_by("-version").first()
    if latest is not None and latest.kind == Judge.Kind.IMPORTED and latest.subjects == wanted:
        return latest
    judge = Judge(task=task, name=name, kind=Judge.Kind.IMPORTED, subjects=wanted)
    return judge.save_as_new_version(user)


def judge_name(tool: str, scorer: str) -> str:
    """The name of the imported judge of a tool's scorer ("lm-eval-capitals")."""
    return f"{tool}-{scorer}".replace("_", "-").replace("/", "-").lower()[:100]


def _response_set(
    task: Task, dataset: Any, model: ModelResults, items: dict[str, int], user: Any
) -> Run:
    failed = sum(bool(a.error) for a in model.answers)
    now = timezone.now()
    run = Run.objects.create(
        task=task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        label=model.label[:200],
        epochs=model.epochs,
        total=len(items) * model.epochs,
        done=len(model.answers) - failed,
        failed=failed,
        prompt_tokens=sum(a.prompt_tokens for a in model.answers),
        completion_tokens=sum(a.completion_tokens for a in model.answers),
        status=Run.Status.COMPLETED_WITH_FAILURES if failed else Run.Status.COMPLETED,
        launch=1,
        started_at=now,
        finished_at=now,
        created_by=user,
    )
    Response.objects.bulk_create(
        Response(
            run=run,
            item_id=items[a.key],
            epoch=a.epoch,
            status=Response.Status.FAILED if a.error else Response.Status.OK,
            text=a.text,
            error=a.error,
            finish_reason=a.finish_reason[:32],
            prompt_tokens=a.prompt_tokens,
            completion_tokens=a.completion_tokens,
            attempts=1,
            launch=1,
        )
        for a in model.answers
    )
    return run


def _judge_run(
    judge: Judge,
    source: Run,
    model: ModelResults,
    scorer: str,
    items: dict[str, int],
    user: Any,
) -> Run | None:
    """The judge run of `scorer` over `source`, when the model's answers carry its values."""
    scored = [a for a in model.answers if scorer in a.values]
    if not scored:
        return None
    now = timezone.now()
    run = JudgeRun.create_with(
        judge,
        task=source.task,
        kind=Run.Kind.JUDGE,
        dataset=source.dataset,
        source_run=source,
        label=source.label,
        total=len(items),
        status=Run.Status.COMPLETED,
        launch=1,
        started_at=now,
        finished_at=now,
        created_by=user,
    )
    JudgeRound.objects.bulk_create(
        JudgeRound(
            run=run,
            item_id=items[a.key],
            epoch=a.epoch,
            round=0,
            status=JudgeRound.Status.OK
            if any(v is not None for v in a.values[scorer].values())
            else JudgeRound.Status.FAILED,
            values={s: v for s, v in a.values[scorer].items() if v is not None},
            reason=a.explanations.get(scorer, ""),
            launch=1,
        )
        for a in scored
    )
    by_item: dict[str, dict[int, dict[str, float | None]]] = defaultdict(dict)
    for a in scored:
        by_item[a.key][a.epoch] = a.values[scorer]
    subjects = [s["name"] for s in judge.subjects]
    scores, failed = [], 0
    for key, epochs in by_item.items():
        for subject in subjects:
            if not any(subject in values for values in epochs.values()):
                continue  # a test without this assertion (promptfoo): no score, not a failure
            per_epoch = [epochs.get(e, {}).get(subject) for e in range(model.epochs)]
            present = [v for v in per_epoch if v is not None]
            value = math.fsum(present) / len(present) if present else None
            failed += value is None
            scores.append(
                Score(
                    run=run,
                    item_id=items[key],
                    subject=subject,
                    status=Score.Status.OK if value is not None else Score.Status.FAILED,
                    judge_value=value,
                    final_value=value,
                    round_values=[value],
                    epoch_values=per_epoch if model.epochs > 1 else [],
                    epoch_spread=max(present) - min(present) if len(present) > 1 else 0.0,
                    error="" if value is not None else f"{scorer} gave no {subject} value.",
                    launch=1,
                )
            )
    Score.objects.bulk_create(scores)
    run.done, run.failed = len(by_item), 0
    if failed:
        run.status = Run.Status.COMPLETED_WITH_FAILURES
    run.save(update_fields=["done", "failed", "status"])
    return run


def subject_range(values: list[float]) -> tuple[float, float]:
    """The range a scorer's values are reviewed in: 0–1 unless they go beyond it."""
    return (min([0.0, *values]), max([1.0, *values]))
