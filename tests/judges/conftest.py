"""Fixtures for judge runs: a task, a dataset with a response column, a finished generation run,
an endpoint on the loopback LLM server, judges of every kind, and real worker processes."""

import json
from collections.abc import Callable
from typing import Any

import pytest

from apps.datasets.models import Dataset, Item, Task, tags_text
from apps.judges.models import Judge
from apps.runs.models import Endpoint, Response, Run

SUBJECTS = [
    {"name": "accuracy", "min": 1, "max": 5},
    {"name": "clarity", "min": 1, "max": 5},
]


def make_dataset(
    task: Task,
    n: int,
    *,
    name: str = "answers",
    reference: Callable[[int], str] = lambda i: f"gold {i}",
    response: Callable[[int], Any] = lambda i: f"answer number {i}",
    tags: Callable[[int], list[str]] = lambda i: ["even"] if i % 2 == 0 else ["odd"],
) -> Dataset:
    dataset = Dataset.objects.create(
        task=task,
        name=name,
        format=Dataset.Format.JSONL,
        status=Dataset.Status.READY,
        columns=["id", "question", "gold", "response", "tags"],
        mapping={
            "id_column": "id",
            "input_columns": ["question"],
            "reference_column": "gold",
            "tags_column": "tags",
            "response_columns": ["response"],
        },
        row_count=n,
    )
    rows = []
    for i in range(n):
        item_tags = tags(i)
        fields = {
            "id": f"q{i}",
            "question": f"Question {i}?",
            "gold": reference(i),
            "tags": ",".join(item_tags),
        }
        value = response(i)
        if value is not None:
            fields["response"] = value
        rows.append(
            Item(
                dataset=dataset,
                position=i,
                key=f"q{i}",
                fields=fields,
                reference=reference(i),
                tags=item_tags,
                tags_text=tags_text(item_tags),
                search_text=json.dumps(fields).lower(),
            )
        )
    Item.objects.bulk_create(rows)
    counts: dict[str, int] = {}
    for row in rows:
        for tag in row.tags:
            counts[tag] = counts.get(tag, 0) + 1
    dataset.tag_counts = counts
    dataset.save(update_fields=["tag_counts"])
    return dataset


def make_generation_run(
    dataset: Dataset,
    texts: dict[int, str | None],
    *,
    label: str = "model-a",
    status: str = Run.Status.COMPLETED,
) -> Run:
    """A generation run that has ended, with a Response per item: text, or failed for None
    (items missing from `texts` get no Response at all)."""
    run = Run.objects.create(
        task=dataset.task, kind=Run.Kind.GENERATION, dataset=dataset, label=label, status=status
    )
    items = {item.position: item for item in dataset.items.all()}
    Response.objects.bulk_create(
        Response(
            run=run,
            item=items[position],
            status=Response.Status.OK if text is not None else Response.Status.FAILED,
            text=text or "",
            error_kind="" if text is not None else "api_error",
            error="" if text is not None else "the server failed (500): boom",
            epoch=1,
        )
        for position, text in texts.items()
    )
    return run


def make_judge(task: Task, kind: str = Judge.Kind.RUBRIC, **fields: Any) -> Judge:
    defaults: dict[str, Any] = {"name": f"{kind.replace('_', '-')}-judge", "kind": kind}
    if kind == Judge.Kind.RUBRIC:
        defaults["subjects"] = SUBJECTS
    elif kind in (Judge.Kind.MCQ, Judge.Kind.MCQ_RULE):
        defaults["subjects"] = [{"name": "score", "min": 0, "max": 100}]
    else:
        defaults["metric"] = "exact_match"
        defaults["subjects"] = [{"name": "exact_match", "min": 0, "max": 100}]
    defaults.update(fields)
    return Judge.objects.create(task=task, **defaults)


def rubric_reply(accuracy: float, clarity: float, reason: str = "fine") -> str:
    return json.dumps({"reason": reason, "accuracy": accuracy, "clarity": clarity})


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="qa", name="QA")


@pytest.fixture
def endpoint(db, llm_server) -> Endpoint:
    return Endpoint.objects.create(
        name="judge-llm",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=1,
        api_key_secret="sk-test-judge-0000",
    )
