"""The one place tests make rows: tasks, datasets and items, judges, runs, responses and
scores, made directly with the ORM (the jobs that make them for real are tested on their own).

`make_dataset` is the one way to make a dataset; the `make_*_dataset` helpers only name the
shapes of rows that several test modules share (question/answer items for generation runs,
items with a response column for judge runs, an empty dataset for review tests that add items
one by one).
"""

import itertools
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.utils import timezone

from apps.datasets.models import Dataset, Item, Task, tags_text
from apps.drafting.models import DraftItem, DraftSetup, DraftUnit, Generator
from apps.judges.models import Judge, JudgeRound, JudgeRun, Score, TaskJudging, judge_of
from apps.runs.models import AttemptLog, Response, Run, Turn
from apps.runs.turns import turn_failure, turn_totals

# A two-subject rubric on 1–5, the judge most tests need.
SUBJECTS = [
    {"name": "accuracy", "min": 1, "max": 5},
    {"name": "clarity", "min": 1, "max": 5},
]
_seq = itertools.count(1)


# ---- tasks and datasets ------------------------------------------------------------------------
def make_task(slug: str | None = None) -> Task:
    slug = slug or f"task-{next(_seq)}"
    return Task.objects.create(slug=slug, name=slug.title())


def make_dataset(
    task: Task,
    rows: Sequence[Mapping[str, Any]] = (),
    *,
    name: str | None = None,
    columns: Sequence[str] = (),
    mapping: Mapping[str, Any] | None = None,
    format: str = Dataset.Format.CSV,
) -> Dataset:
    """A ready dataset with one item per row, in the order given.

    rows: {"key", "fields", "tags" (optional), "reference" (optional), "conversation" and
    "turn_references" (optional: canonical messages, one reference per user turn)}; the columns
    default to every field name seen.
    """
    columns = list(columns) or sorted({c for row in rows for c in row.get("fields", {})})
    dataset = Dataset.objects.create(
        task=task,
        name=name or f"data-{next(_seq)}",
        format=format,
        status=Dataset.Status.READY,
        columns=columns,
        mapping=dict(mapping or {}),
        row_count=len(rows),
    )
    items = []
    counts: dict[str, int] = {}
    for position, row in enumerate(rows):
        fields = dict(row.get("fields", {}))
        tags = list(row.get("tags", []))
        for tag in tags:
            counts[tag] = counts.get(tag, 0) + 1
        items.append(
            Item(
                dataset=dataset,
                position=position,
                key=str(row["key"]),
                fields=fields,
                reference=row.get("reference", ""),
                tags=tags,
                tags_text=tags_text(tags),
                search_text=json.dumps(fields, ensure_ascii=False).lower(),
                conversation=list(row.get("conversation", [])),
                turn_references=list(row.get("turn_references", [])),
            )
        )
    Item.objects.bulk_create(items)
    if counts:
        dataset.tag_counts = counts
        dataset.save(update_fields=["tag_counts"])
    return dataset


def make_items(
    task: Task, n: int, tags: Sequence[Sequence[str]] = (), name: str = "set"
) -> Dataset:
    """n items "k0"… with one field, `question`, and the tags given per position."""
    rows = [
        {"key": f"k{i}", "fields": {"question": f"q{i}"}, "tags": tags[i] if i < len(tags) else []}
        for i in range(n)
    ]
    return make_dataset(task, rows, name=name)


def make_qa_dataset(task: Task, n: int, name: str = "questions") -> Dataset:
    """Arithmetic questions for generation runs: item "q<i>" asks "What is i + i?" (answer 2i)."""
    rows = [
        {
            "key": f"q{i}",
            "fields": {"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)},
            "reference": str(2 * i),
        }
        for i in range(n)
    ]
    mapping = {"id_column": "id", "input_columns": ["question"], "reference_column": "answer"}
    return make_dataset(
        task, rows, name=name, columns=["id", "question", "answer"], mapping=mapping
    )


def make_conversation_dataset(
    task: Task,
    conversations: Sequence[Sequence[str] | Sequence[Mapping[str, Any]]],
    *,
    name: str = "dialogues",
    categories: Sequence[str] = (),
    references: Sequence[Sequence[str]] = (),
) -> Dataset:
    """Conversation items "d0"…, as an MT-Bench file imports (`turns` the conversation column):
    each entry a list of user turns (texts) or of canonical chat messages; `categories` and
    per-turn `references` by position when given."""
    rows = []
    for i, conversation in enumerate(conversations):
        messages = [
            {"role": "user", "content": m} if isinstance(m, str) else dict(m) for m in conversation
        ]
        fields: dict[str, Any] = {"id": f"d{i}", "turns": messages}
        if i < len(categories):
            fields["category"] = categories[i]
        row: dict[str, Any] = {"key": f"d{i}", "fields": fields, "conversation": messages}
        if i < len(references):
            row["turn_references"] = list(references[i])
        rows.append(row)
    mapping = {
        "id_column": "id",
        "input_columns": ["category"] if categories else [],
        "conversation_column": "turns",
    }
    columns = ["id", "turns", *(["category"] if categories else [])]
    return make_dataset(
        task, rows, name=name, columns=columns, mapping=mapping, format=Dataset.Format.JSONL
    )


# Two multiple-choice items × three options for log-likelihood choice scoring, with the
# log-probabilities the loopback server gives each option word (its `word_logprobs` knob).
# Worked by hand (a continuation is " " + the option; normalised = sum / characters):
#   c1 (answer B): A "Oxygen" -2.0 (-2/6 = -0.333), B "Carbon dioxide" -1.5 - 1.0 = -2.5
#       (-2.5/14 = -0.179), C "Helium" -3.0 (-0.5): raw pick A (wrong), normalised B (right);
#   c2 (answer A): A "Mars" -0.5 (-0.125), B "Venus" -2.5 (-0.5), C "Jupiter" -4.0 (-0.571):
#       both pick A (right).
# So accuracy 1/2 = 50 and length-normalised accuracy 2/2 = 100.
CHOICE_LOGPROBS = {
    "Oxygen": -2.0,
    "Carbon": -1.5,
    "dioxide": -1.0,
    "Helium": -3.0,
    "Mars": -0.5,
    "Venus": -2.5,
    "Jupiter": -4.0,
}
CHOICE_ROWS = [
    ("c1", "Which gas do plants take in?", "Oxygen", "Carbon dioxide", "Helium", "B"),
    ("c2", "Which planet is red?", "Mars", "Venus", "Jupiter", "A"),
]


def make_choice_dataset(task: Task, name: str = "choices") -> Dataset:
    """CHOICE_ROWS as an uploaded CSV maps them: options in columns A, B, C, answer key as
    the reference."""
    rows = [
        {
            "key": key,
            "fields": {"id": key, "question": q, "A": a, "B": b, "C": c, "answer": answer},
            "reference": answer,
        }
        for key, q, a, b, c, answer in CHOICE_ROWS
    ]
    mapping = {
        "id_column": "id",
        "input_columns": ["question", "A", "B", "C"],
        "reference_column": "answer",
    }
    columns = ["id", "question", "A", "B", "C", "answer"]
    return make_dataset(task, rows, name=name, columns=columns, mapping=mapping)


def make_answers_dataset(
    task: Task,
    n: int,
    *,
    name: str = "answers",
    reference: Callable[[int], str] = lambda i: f"gold {i}",
    response: Callable[[int], Any] = lambda i: f"answer number {i}",
    tags: Callable[[int], list[str]] = lambda i: ["even"] if i % 2 == 0 else ["odd"],
) -> Dataset:
    """Items with an answer already given (the `response` column, absent where `response`
    gives None) for judge runs, a reference, and even/odd tags."""
    rows = []
    for i in range(n):
        fields: dict[str, Any] = {
            "id": f"q{i}",
            "question": f"Question {i}?",
            "gold": reference(i),
            "tags": ",".join(tags(i)),
        }
        if (value := response(i)) is not None:
            fields["response"] = value
        rows.append({"key": f"q{i}", "fields": fields, "reference": reference(i), "tags": tags(i)})
    mapping = {
        "id_column": "id",
        "input_columns": ["question"],
        "reference_column": "gold",
        "tags_column": "tags",
        "response_columns": ["response"],
    }
    return make_dataset(
        task,
        rows,
        name=name,
        columns=["id", "question", "gold", "response", "tags"],
        mapping=mapping,
        format=Dataset.Format.JSONL,
    )


def make_review_dataset(task: Task, response_column: str = "answer") -> Dataset:
    """An empty dataset with a response column; review tests add items with `make_item`."""
    mapping = {
        "id_column": "id",
        "input_columns": ["question"],
        "reference_column": "gold",
        "tags_column": "tag",
        "response_columns": [response_column],
    }
    columns = ["id", "question", "gold", response_column, "tag"]
    return make_dataset(task, columns=columns, mapping=mapping)


def make_item(
    dataset: Dataset,
    position: int,
    question: str = "",
    answer: str = "",
    reference: str = "",
    tags: list[str] | None = None,
    key: str | None = None,
) -> Item:
    """One item of a `make_review_dataset` dataset."""
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
        tags_text=tags_text(tags),
        search_text=" ".join(str(v) for v in fields.values()).lower(),
    )


# ---- judges and runs ---------------------------------------------------------------------------
def make_judge(task: Task, kind: str = Judge.Kind.RUBRIC, **fields: Any) -> Judge:
    """A judge of `kind` with the subjects such a judge has; `fields` override anything."""
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


def set_judging(task: Task, **fields: Any) -> TaskJudging:
    """Set the task's default judge and/or its endpoint (TaskJudging fields), keeping the rest."""
    judging = TaskJudging.for_task(task)
    for name, value in fields.items():
        setattr(judging, name, value)
    judging.save()
    return judging


def make_generation_run(
    dataset: Dataset,
    texts: Mapping[int | str, str | list[str | None] | None],
    *,
    label: str = "model-a",
    status: str = Run.Status.COMPLETED,
) -> Run:
    """A generation run that has ended, with a Response per entry of `texts` (keyed by item
    position or item key): the text, or failed for None; a list gives one per epoch (the run
    has as many epochs as the longest list). Other items get no Response."""
    by_epoch = {where: text if isinstance(text, list) else [text] for where, text in texts.items()}
    run = Run.objects.create(
        task=dataset.task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        label=label,
        status=status,
        epochs=max((len(t) for t in by_epoch.values()), default=1),
    )
    items = list(dataset.items.all())
    by = {item.position: item for item in items} | {item.key: item for item in items}
    Response.objects.bulk_create(
        Response(
            run=run,
            item=by[where],
            epoch=epoch,
            status=Response.Status.OK if text is not None else Response.Status.FAILED,
            text=text or "",
            error_kind="" if text is not None else "api_error",
            error="" if text is not None else "the server failed (500): boom",
            launch=1,
        )
        for where, epoch_texts in by_epoch.items()
        for epoch, text in enumerate(epoch_texts)
    )
    return run


def make_multi_turn_run(
    dataset: Dataset,
    answers: Mapping[int | str, Sequence[str | None]],
    *,
    label: str = "model-a",
    status: str = Run.Status.COMPLETED,
    epoch: int = 0,
) -> Run:
    """A multi-turn generation run that has ended: per entry of `answers` (keyed by item
    position or key) a Turn per answer in order, None a failed turn (the item's Response
    failed, naming it; nothing after it asked), and the item's Response (text = last answer,
    tokens and cost summed). Other items get nothing."""
    run = Run.objects.create(
        task=dataset.task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        label=label,
        status=status,
        multi_turn=True,
        epochs=epoch + 1,
        launch=1,
    )
    add_turns(run, answers, epoch=epoch)
    return run


def add_turns(
    run: Run, answers: Mapping[int | str, Sequence[str | None]], *, epoch: int = 0
) -> None:
    """The Turn rows and Responses of `make_multi_turn_run` for one epoch of `run`."""
    items = list(run.dataset.items.all())
    by = {item.position: item for item in items} | {item.key: item for item in items}
    for where, texts in answers.items():
        item = by[where]
        asked = item.user_turns()
        turns = []
        for number, text in enumerate(texts, 1):
            failed = text is None
            turns.append(
                Turn(
                    run=run,
                    item=item,
                    epoch=epoch,
                    number=number,
                    asked=asked[number - 1],
                    text=text or "",
                    finish_reason="" if failed else "stop",
                    prompt_tokens=10 * number,
                    completion_tokens=5,
                    attempts=1,
                    error_kind="api_error" if failed else "",
                    error="the server failed (500): boom" if failed else "",
                    launch=1,
                )
            )
            if failed:
                break
        Turn.objects.bulk_create(turns)
        last = turns[-1]
        ok = last.is_answered
        if ok and len(turns) < len(asked):
            continue  # turns still to ask: the item has no Response yet
        Response.objects.create(
            run=run,
            item=item,
            epoch=epoch,
            status=Response.Status.OK if ok else Response.Status.FAILED,
            text=last.text if ok else "",
            finish_reason=last.finish_reason,
            error_kind="" if ok else last.error_kind,
            error="" if ok else turn_failure(last.number, len(asked), last.error),
            launch=1,
            **turn_totals(turns),
        )


def make_judge_run(
    dataset: Dataset,
    judge: Judge | None = None,
    *,
    source_run: Run | None = None,
    source_column: str | None = None,
    label: str = "",
    status: str = Run.Status.COMPLETED,
) -> Run:
    """A judge run of `judge` (by default a rubric judge of two rounds) over the generation
    run `source_run`, else over the dataset's `source_column` ("answer" unless given)."""
    if judge is None:
        judge = make_judge(
            dataset.task, name=f"judge-{next(_seq)}", n_iter=2, user_prompt="Rate {answer}"
        )
    if source_column is None:
        source_column = "" if source_run else "answer"
    return JudgeRun.create_with(
        judge,
        task=dataset.task,
        kind=Run.Kind.JUDGE,
        dataset=dataset,
        source_run=source_run,
        source_column=source_column,
        label=label,
        status=status,
        finished_at=timezone.now() if status in Run.TERMINAL_STATUSES else None,
    )


# ---- what a judge run leaves behind ----------------------------------------------------------------
def add_scores(run: Run, values: Mapping[str, Mapping[str, Any]]) -> list[Score]:
    """values: item key -> subject -> value; None means the item failed on that subject, a
    list is one value per epoch (the judge value their mean). One round per item, so no
    JudgeRound rows (judge_item writes those)."""
    items = {i.key: i for i in run.dataset.items.all()}
    scores = []
    for key, subjects in values.items():
        for subject, value in subjects.items():
            failed = value is None
            epochs = [float(v) for v in value] if isinstance(value, list) else []
            if epochs:
                value = sum(epochs) / len(epochs)
            scores.append(
                Score(
                    run=run,
                    item=items[key],
                    subject=subject,
                    status="failed" if failed else "ok",
                    judge_value=None if failed else float(value),
                    final_value=None if failed else float(value),
                    round_values=[None] if failed else epochs or [float(value)],
                    epoch_values=epochs,
                    epoch_spread=max(epochs) - min(epochs) if epochs else 0.0,
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
    for subject in judge_of(run).subject_names:
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
    return judge_item(run, item, [None] * judge_of(run).n_iter)


def scenario(n: int = 4, **run_kwargs: Any) -> tuple[Run, list[Item]]:
    """A judge run over n items, all judged with agreeing rounds of 3 on every subject."""
    dataset = make_review_dataset(make_task())
    items = [make_item(dataset, i) for i in range(n)]
    run_kwargs.setdefault("label", "model-a")
    run = make_judge_run(dataset, **run_kwargs)
    for item in items:
        judge_item(run, item, [{"accuracy": 3, "clarity": 3}] * judge_of(run).n_iter)
    return run, items


def rubric_reply(accuracy: float, clarity: float, reason: str = "fine") -> str:
    """What an LLM rubric judge answers, for the loopback server's scripted replies."""
    return json.dumps({"reason": reason, "accuracy": accuracy, "clarity": clarity})


# ---- generated drafts ------------------------------------------------------------------------
def make_generator(task: Task, name: str = "world-facts", **prompts: str) -> Generator:
    """A generator version whose prompts the loopback server's scripts can tell apart."""
    defaults = {
        "content_prompt": "Invent facts about world {{ unit }}.",
        "questions_prompt": "Ask about these facts:\n{{ content }}",
        "answers_prompt": "Answer each question:\n{{ questions }}\nFacts:\n{{ content }}",
    }
    generator = Generator(task=task, name=name, **{**defaults, **prompts})
    return generator.save_as_new_version(None)


def make_draft(
    generator: Generator,
    units: Sequence[Sequence[tuple[str, str]]],
    *,
    content: str = "Facts of unit {n}.",
    decisions: Sequence[str] = (),
) -> Dataset:
    """A finished dataset generation run's draft: one unit per entry of `units`, each a list of
    (question, reference); `decisions` (in item order) are set as if people had decided."""
    dataset = Dataset.objects.new_version(
        generator.task, generator.name, format=Dataset.Format.JSONL, status=Dataset.Status.DRAFT
    )
    run = Run.objects.create(
        task=generator.task,
        kind=Run.Kind.GENERATE_DATASET,
        dataset=dataset,
        status=Run.Status.COMPLETED,
        total=len(units),
        done=len(units),
        launch=1,
    )
    DraftSetup.objects.create(run=run, generator=generator)
    decided = iter(decisions)
    for index, pairs in enumerate(units):
        text = content.format(n=index + 1)
        unit = DraftUnit.objects.create(
            run=run, index=index, status=DraftUnit.Status.OK, content=text, launch=1
        )
        for number, (question, reference) in enumerate(pairs):
            made = {"content": text, "question": question, "reference": reference}
            DraftItem.objects.create(
                unit=unit,
                dataset=dataset,
                generator=generator,
                number=number,
                generated=made,
                decision=next(decided, DraftItem.Decision.PENDING),
                **made,
            )
    return dataset
