"""Search a task's items and responses by text (#28.5): each hit is an item, with what matched
(its own fields, the models' answers) and a link to where a reviewer reads it."""

import re
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.urls import reverse

from apps.datasets import fulltext
from apps.datasets.models import Item, Task
from apps.datasets.values import as_text
from apps.runs.models import Response, Run, Turn

PER_PAGE = 20
BEFORE, AFTER = 80, 220  # characters of context around the first match in a snippet
# Items listed at most: a word in every answer matches every item, and counting 100k matches
# took 10 s for a list nobody pages through; the page says there are more and asks for words.
CAP = 1000
# Matching rows (in any task) above which items are tested one by one, in page order, until
# the page and the cap are full; below it, the index's few matches are read first.
COMMON = 5000


@dataclass
class Found:
    """One matching text: whose it is, a snippet as (text, is a match) parts, and its link."""

    label: str
    parts: list[tuple[str, bool]]
    url: str


@dataclass
class Hit:
    item: Item
    url: str  # the item's review, else its page in the dataset
    found: list[Found] = field(default_factory=list)


def matching_items(task: Task, text: str, *, per_row: bool = False) -> QuerySet[Item]:
    """The task's items whose fields, or any model's response to them (any turn's answer of a
    multi-turn run), hold `text`, in page order. `per_row` (a common word): each item tested on
    its own (`fulltext.condition`), so a query that stops early reads only what it lists."""
    responses = Response.objects.filter(run__task=task)
    turns = Turn.objects.filter(run__task=task)
    if per_row:
        own = fulltext.condition(Item, text, per_row=True)
        answered = Exists(responses.filter(item_id=OuterRef("pk")).filter(
            fulltext.condition(Response, text, per_row=True)))  # fmt: skip
        asked = Exists(turns.filter(item_id=OuterRef("pk")).filter(
            fulltext.condition(Turn, text, per_row=True)))  # fmt: skip
        either = own | Q(answered) | Q(asked)
    else:
        either = (
            fulltext.condition(Item, text)
            | Q(pk__in=fulltext.matching(responses, text).values("item_id"))
            | Q(pk__in=fulltext.matching(turns, text).values("item_id"))
        )
    return Item.objects.filter(dataset__task=task).filter(either).order_by("dataset_id", "position")


class Capped(Paginator):
    """Pages over at most CAP items; `capped`: more matched than are listed."""

    def __init__(self, ids: list[int], capped: bool) -> None:
        super().__init__(ids, PER_PAGE)
        self.capped = capped


def found_ids(task: Task, text: str) -> tuple[list[int], bool]:
    """The ids of the first CAP matching items in page order, and whether there are more."""
    common = any(fulltext.more_than(model, text, COMMON) for model in (Response, Turn, Item))
    ids = list(matching_items(task, text, per_row=common).values_list("pk", flat=True)[: CAP + 1])
    return ids[:CAP], len(ids) > CAP


def snippet(text: str, query: str) -> list[tuple[str, bool]]:
    """The text around the first match, every occurrence of a query word marked (by the
    caller's template, which escapes each part)."""
    words = sorted(
        {w for term in fulltext.terms(query) for w in term.text.split()}, key=len, reverse=True
    )
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None
    first = pattern.search(text) if pattern else None
    start = max(0, first.start() - BEFORE) if first else 0
    end = min(len(text), (first.start() if first else 0) + AFTER)
    window = text[start:end]
    parts: list[tuple[str, bool]] = [("…", False)] if start else []
    at = 0
    for match in pattern.finditer(window) if pattern else ():
        parts += [(window[at : match.start()], False), (match.group(), True)]
        at = match.end()
    parts.append((window[at:] + ("…" if end < len(text) else ""), False))
    return [part for part in parts if part[0]]


def _review_runs(task: Task) -> tuple[dict[int, int], dict[int, int]]:
    """The newest judge run per generation run it judged, and per dataset it covers."""
    by_source: dict[int, int] = {}
    by_dataset: dict[int, int] = {}
    judged = Run.objects.judging().filter(task=task).order_by("pk")
    for pk, source_id, dataset_id in judged.values_list("pk", "source_run_id", "dataset_id"):
        if source_id:
            by_source[source_id] = pk
        by_dataset[dataset_id] = pk
    return by_source, by_dataset


def search(task: Task, text: str, number: Any = 1) -> tuple[Page, list[Hit]]:
    shown = Capped(*found_ids(task, text)).get_page(number)
    ids = list(shown.object_list)
    by_pk = Item.objects.select_related("dataset").in_bulk(ids)
    items = [by_pk[pk] for pk in ids]
    by_source, by_dataset = _review_runs(task)
    # A page's few items: each row looked up in the index, not the index's every match read.
    own = set(
        Item.objects.filter(pk__in=ids)
        .filter(fulltext.condition(Item, text, per_row=True))
        .values_list("pk", flat=True)
    )
    responses = (
        Response.objects.filter(run__task=task, item_id__in=ids)
        .filter(fulltext.condition(Response, text, per_row=True))
        .select_related("run__endpoint")
        .order_by("run_id", "epoch")
    )
    answers: dict[int, dict[int, Response | Turn]] = {}
    for response in responses:
        answers.setdefault(response.item_id, {}).setdefault(response.run_id, response)
    # A multi-turn run's answers: the first turn that matches, named (its last answer is
    # also the Response's text, so a match there is shown once, as that turn).
    turns = (
        Turn.objects.filter(run__task=task, item_id__in=ids)
        .filter(fulltext.condition(Turn, text, per_row=True))
        .select_related("run__endpoint")
        .order_by("run_id", "epoch", "number")
    )
    for turn in turns:
        runs = answers.setdefault(turn.item_id, {})
        if not isinstance(runs.get(turn.run_id), Turn):
            runs[turn.run_id] = turn
    hits = []
    for item in items:
        judge_run = by_dataset.get(item.dataset_id)
        url = (
            reverse("review:item", args=[judge_run, item.pk])
            if judge_run
            else reverse("datasets:item-detail", args=[item.dataset_id, item.position])
        )
        hit = Hit(item, url)
        if item.pk in own:
            fields = "\n".join(f"{k}: {as_text(v)}" for k, v in item.fields.items())
            hit.found.append(Found("Item", snippet(fields, text), url))
        for run_id, answer in answers.get(item.pk, {}).items():
            run = answer.run
            label = run.label or (run.endpoint.model if run.endpoint else f"run #{run.pk}")
            reviewed = by_source.get(run_id)
            link = (
                reverse("review:item", args=[reviewed, item.pk])
                if reviewed
                else reverse("runs:response-detail", args=[run_id, item.pk])
            )
            if isinstance(answer, Turn):
                label = f"{label} · turn {answer.number}"
            hit.found.append(Found(label, snippet(answer.text, text), link))
        hits.append(hit)
    return shown, hits
