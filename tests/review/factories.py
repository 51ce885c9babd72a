"""Rows a judge run leaves behind, made directly with the ORM (the engine is another app's job)."""

import itertools
import statistics
from typing import Any

from apps.datasets.models import Dataset, Item, Task
from apps.judges.models import Judge, JudgeRound, Score
from apps.runs.models import AttemptLog, Response, Run

SUBJECTS = [
    {"name": "accuracy", "min": 1, "max": 5},
    {"name": "clarity", "min": 1, "max": 5},
]
_seq = itertools.count(1)


def make_task(slug: str | None = None) -> Task:
    slug = slug or f"task-{next(_seq)}"
    return Task.objects.create(slug=slug, name=slug.title())


def make_dataset(task: Task, response_column: str = "answer") -> Dataset:
    return Dataset.objects.create(
        task=task,
        name=f"data-{next(_seq)}",
        format=Dataset.Format.CSV,
        status=Dataset.Status.READY,
        columns=["id", "question", "gold", response_column, "tag"],
        mapping={
            "id_column": "id",
            "input_columns": ["question"],
            "reference_column": "gold",
            "tags_column": "tag",
            "response_columns": [response_column],
        },
    )


def make_item(
    dataset: Dataset,
    position: int,
    question: str = "",
    answer: str = "",
    reference: str = "",
    tags: list[str] | None = None,
    key: str | None = None,
) -> Item:
    tags = tags or []
    fields = {
        "id": key or f"q{position}",
        "question": question or f"Question {position}?",
        "gold": reference or f"Gold {position}",
        "answer": answer or f"Answer {position}",
        "tag": ",".join(tags),
    }
    return Item.objects.create(
        dataset=dataset,
        position=position,
        key=key or f"q{position}",
        fields=fields,
        reference=fields["gold"],
        tags=tags,
        tags_text="".join(f"|{t}" for t in tags) + "|" if tags else "",
        search_text=" ".join(str(v) for v in fields.values()).lower(),
    )


def make_judge(task: Task, subjects: list[dict] | None = None, n_iter: int = 2) -> Judge:
    return Judge.objects.create(
        task=task,
        name=f"judge-{next(_seq)}",
        kind=Judge.Kind.RUBRIC,
        subjects=subjects or SUBJECTS,
        n_iter=n_iter,
        user_prompt="Rate {answer}",
    )


def make_judge_run(
    dataset: Dataset,
    judge: Judge | None = None,
    source_run: Run | None = None,
    label: str = "model-a",
) -> Run:
    judge = judge or make_judge(dataset.task)
    return Run.objects.create(
        task=dataset.task,
        kind=Run.Kind.JUDGE,
        status=Run.Status.COMPLETED,
        dataset=dataset,
        judge=judge,
        source_run=source_run,
        source_column="" if source_run else "answer",
        label=label,
    )


def make_generation_run(dataset: Dataset, texts: dict[int, str]) -> Run:
    run = Run.objects.create(
        task=dataset.task, kind=Run.Kind.GENERATION, dataset=dataset, label="gen"
    )
    for item in dataset.items.all():
        Response.objects.create(
            run=run, item=item, status=Response.Status.OK, text=texts.get(item.position, "")
        )
    return run


def judge_item(
    run: Run,
    item: Item,
    rounds: list[dict[str, float] | None],
    reasons: list[str] | None = None,
    raw_replies: list[str] | None = None,
) -> list[Score]:
    """Record the judge's rounds for an item (None = a failed round) and the scores they give.

    A subject is failed when no round gave a value for it.
    """
    reasons = reasons or [f"Reason of round {i}" for i in range(len(rounds))]
    raw_replies = raw_replies or [f'{{"round": {i}}}' for i in range(len(rounds))]
    for index, values in enumerate(rounds):
        JudgeRound.objects.create(
            run=run,
            item=item,
            round=index,
            status=JudgeRound.Status.FAILED if values is None else JudgeRound.Status.OK,
            values=values or {},
            reason=reasons[index] if values is not None else "",
            raw_reply=raw_replies[index],
            error_kind="unparseable" if values is None else "",
            error="Reply was not JSON" if values is None else "",
        )
    scores = []
    for subject in run.judge.subject_names:
        per_round: list[Any] = [None if v is None else v.get(subject) for v in rounds]
        got = [v for v in per_round if v is not None]
        judge_value = statistics.fmean(got) if got else None
        scores.append(
            Score.objects.create(
                run=run,
                item=item,
                subject=subject,
                status=Score.Status.OK if got else Score.Status.FAILED,
                judge_value=judge_value,
                round_values=per_round,
                spread=(max(got) - min(got)) if got else 0.0,
                final_value=judge_value,
                error_kind="" if got else "unparseable",
                error="" if got else "No round gave a value",
            )
        )
    return scores


def fail_item(run: Run, item: Item) -> list[Score]:
    """Every round failed; the attempt log keeps the request and the raw reply."""
    AttemptLog.objects.create(
        run=run,
        item=item,
        round=0,
        attempt=1,
        ok=False,
        request_messages=[{"role": "user", "content": f"Rate {item.key}"}],
        raw_reply="not json at all",
        error_kind="unparseable",
        error="Reply was not JSON",
    )
    return judge_item(run, item, [None] * run.judge.n_iter)


def scenario(n: int = 4, **run_kwargs: Any) -> tuple[Run, list[Item]]:
    """A judge run over n items, all judged with agreeing rounds of 3 on every subject."""
    dataset = make_dataset(make_task())
    items = [make_item(dataset, i) for i in range(n)]
    run = make_judge_run(dataset, **run_kwargs)
    for item in items:
        judge_item(run, item, [{"accuracy": 3, "clarity": 3}] * run.judge.n_iter)
    return run, items
