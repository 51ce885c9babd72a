"""Rows for leaderboard tests, made directly with the ORM (the jobs that make them live elsewhere)."""

from collections.abc import Mapping, Sequence
from typing import Any

from django.utils import timezone

from apps.datasets.models import Dataset, Item, Task
from apps.judges.models import Judge, Score
from apps.runs.models import Response, Run

RUBRIC = [{"name": "accuracy", "min": 1, "max": 5}, {"name": "clarity", "min": 1, "max": 5}]


def make_task(slug: str = "demo") -> Task:
    return Task.objects.create(slug=slug, name=slug.title())


def make_dataset(
    task: Task, rows: Sequence[Mapping[str, Any]], name: str = "set", columns: Sequence[str] = ()
) -> Dataset:
    """rows: {"key", "fields", "tags"}; positions follow the order given."""
    columns = list(columns) or sorted({c for row in rows for c in row.get("fields", {})})
    dataset = Dataset.objects.create(
        task=task, name=name, format="csv", status="ready", columns=columns, row_count=len(rows)
    )
    Item.objects.bulk_create(
        Item(
            dataset=dataset,
            position=i,
            key=str(row["key"]),
            fields=dict(row.get("fields", {})),
            tags=list(row.get("tags", [])),
            tags_text="|" + "|".join(row["tags"]) + "|" if row.get("tags") else "",
        )
        for i, row in enumerate(rows)
    )
    return dataset


def make_items(
    task: Task, n: int, tags: Sequence[Sequence[str]] = (), name: str = "set"
) -> Dataset:
    return make_dataset(
        task,
        [
            {
                "key": f"k{i}",
                "fields": {"question": f"q{i}"},
                "tags": tags[i] if i < len(tags) else [],
            }
            for i in range(n)
        ],
        name=name,
    )


def make_judge(
    task: Task,
    name: str = "quality",
    subjects: Sequence[Mapping[str, Any]] = RUBRIC,
    kind: str = "rubric",
    version: int = 1,
    metric: str = "",
) -> Judge:
    return Judge.objects.create(
        task=task, name=name, version=version, kind=kind, subjects=list(subjects), metric=metric
    )


def make_generation_run(
    task: Task, dataset: Dataset, label: str, texts: Mapping[str, str] | None = None
) -> Run:
    run = Run.objects.create(
        task=task, kind="generation", dataset=dataset, label=label, status="completed"
    )
    if texts:
        items = {i.key: i for i in dataset.items.all()}
        Response.objects.bulk_create(
            Response(run=run, item=items[key], status="ok", text=text)
            for key, text in texts.items()
        )
    return run


def make_judge_run(
    task: Task,
    dataset: Dataset,
    judge: Judge,
    *,
    source_run: Run | None = None,
    source_column: str = "",
    label: str = "",
    status: str = "completed",
) -> Run:
    return Run.objects.create(
        task=task,
        kind="judge",
        dataset=dataset,
        judge=judge,
        source_run=source_run,
        source_column=source_column,
        label=label,
        status=status,
        finished_at=timezone.now(),
    )


def add_scores(run: Run, values: Mapping[str, Mapping[str, Any]]) -> list[Score]:
    """values: item key -> subject -> value; None means the item failed on that subject."""
    items = {i.key: i for i in run.dataset.items.all()}
    scores = []
    for key, subjects in values.items():
        for subject, value in subjects.items():
            failed = value is None
            scores.append(
                Score(
                    run=run,
                    item=items[key],
                    subject=subject,
                    status="failed" if failed else "ok",
                    judge_value=None if failed else float(value),
                    final_value=None if failed else float(value),
                    round_values=[None] if failed else [float(value)],
                    error_kind="unparseable" if failed else "",
                    error="no JSON in the reply" if failed else "",
                )
            )
    created = Score.objects.bulk_create(scores)
    # What the judging job does after writing: move the run row (the summaries watch it).
    run.add_progress(done=sum(v is not None for s in values.values() for v in s.values()))
    run.refresh_from_db()
    return created


def score(run: Run, key: str, subject: str) -> Score:
    return Score.objects.get(run=run, item__key=key, subject=subject)
