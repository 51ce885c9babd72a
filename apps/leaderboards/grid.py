"""A grid of models per item (#28.3, promptfoo's matrix): for a task's dataset and judge, rows
are items and columns are the models' responses with their scores, failures marked; filtered
by tag, score range and disagreement between models; each cell opens the item's review."""

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.core.paginator import Page, Paginator

from apps.datasets.models import Dataset, Item
from apps.datasets.values import as_text
from apps.judges.models import Judge, Score
from apps.leaderboards import items as item_arrays
from apps.leaderboards.boards import model_label
from apps.leaderboards.compare import review_url
from apps.leaderboards.memo import review_state
from apps.runs.models import Response, Run

PER_PAGE = 25
SNIPPET = 280  # characters of a response shown in a cell; the review page has it whole


@dataclass(frozen=True)
class Cell:
    value: float | None  # None: the item failed in this run (or has no score)
    scored: bool
    text: str
    url: str


@dataclass
class Row:
    item: Item
    cells: list[Cell] = field(default_factory=list)

    @property
    def spread(self) -> float | None:
        values = [c.value for c in self.cells if c.value is not None]
        return max(values) - min(values) if len(values) > 1 else None


@dataclass
class Grid:
    runs: list[Run]
    labels: list[str]
    subject: str
    page: Page
    rows: list[Row]
    matched: int  # items that pass the filters


def judge_runs(dataset: Dataset, judge: Judge) -> list[Run]:
    """The judge's runs over the dataset: one column each (oldest first, as models arrived)."""
    return list(
        Run.objects.judging()
        .filter(dataset=dataset, judged_with__judge=judge)
        .exclude(status=Run.Status.QUEUED)
        .select_related("source_run__endpoint", "dataset")
        .order_by("pk")
    )


def _values(
    runs: list[Run], subject: str, mode: str, item_ids: list[int] | None = None
) -> dict[int, dict[int, float | None]]:
    """run id -> item id -> value (None: failed), for every item or only `item_ids`."""
    out: dict[int, dict[int, float | None]] = {run.pk: {} for run in runs}
    rows = Score.objects.filter(run__in=runs, subject=subject)
    if item_ids is not None:
        rows = rows.filter(item_id__in=item_ids)
    fields = ("run_id", "item_id", "status", "judge_value", "override_value")
    for run_id, item_id, status, judge, override in rows.values_list(*fields).iterator(5000):
        value = judge if status == Score.Status.OK else None
        if mode == "human" and override is not None:
            value = override
        out[run_id][item_id] = value
    return out


def _filtered_ids(
    dataset: Dataset,
    runs: list[Run],
    subject: str,
    mode: str,
    tag: str,
    low: float | None,
    high: float | None,
    disagree: bool,
) -> list[int]:
    """The ids of the items that pass the filters, in position order. Vectorised over the
    models' values as the boards keep them (apps.leaderboards.items: the judge's values read
    once per state of a run's results, the reviews laid over them in one small query), so a
    review costs the next page a query, not a re-read of every score."""
    found = item_arrays.dataset_items(dataset)
    ids = np.fromiter(found.index, dtype=np.int64, count=len(found.index))
    keep = item_arrays.tag_mask(found.tags, tag or None)
    if (low is not None or high is not None or disagree) and runs:
        last_event = review_state() if mode == "human" else None
        missing = np.full(len(ids), np.nan)
        matrix = np.vstack(
            [item_arrays.item_values(run, mode, last_event).get(subject, missing) for run in runs]
        )
        present = ~np.isnan(matrix)
        if low is not None or high is not None:
            lo = low if low is not None else -np.inf
            hi = high if high is not None else np.inf
            with np.errstate(invalid="ignore"):
                keep &= (present & (matrix >= lo) & (matrix <= hi)).any(axis=0)
        if disagree:
            # Models disagree: different values, or a value beside a failure.
            biggest = np.where(present, matrix, -np.inf).max(axis=0)
            smallest = np.where(present, matrix, np.inf).min(axis=0)
            some = present.any(axis=0)
            keep &= some & ((biggest != smallest) | ~present.all(axis=0))
    return ids[keep].tolist()


def _texts(runs: list[Run], items: list[Item]) -> dict[tuple[int, int], str]:
    """(run id, item id) -> the response the judge scored, for the page's items only."""
    ids = [item.pk for item in items]
    by_source = {run.source_run_id: run.pk for run in runs if run.source_run_id}
    found: dict[tuple[int, int], str] = {}
    answers = Response.objects.filter(run_id__in=by_source, item_id__in=ids, epoch=0)
    for source_id, item_id, text in answers.values_list("run_id", "item_id", "text"):
        found[(by_source[source_id], item_id)] = text
    for run in runs:
        if run.source_column:
            for item in items:
                found[(run.pk, item.pk)] = as_text(item.fields.get(run.source_column))
    return found


def build(
    dataset: Dataset,
    judge: Judge,
    subject: str,
    mode: str = "human",
    tag: str = "",
    low: float | None = None,
    high: float | None = None,
    disagree: bool = False,
    page: Any = 1,
) -> Grid:
    runs = judge_runs(dataset, judge)
    ids = _filtered_ids(dataset, runs, subject, mode, tag, low, high, disagree)
    shown = Paginator(ids, PER_PAGE).get_page(page)
    page_items = list(Item.objects.filter(pk__in=list(shown.object_list)).order_by("position"))
    values = _values(runs, subject, mode, [item.pk for item in page_items])
    texts = _texts(runs, page_items)
    rows = []
    for item in page_items:
        row = Row(item)
        for run in runs:
            scored = item.pk in values[run.pk]
            text = texts.get((run.pk, item.pk), "")
            row.cells.append(
                Cell(
                    values[run.pk].get(item.pk),
                    scored,
                    text[:SNIPPET] + ("…" if len(text) > SNIPPET else ""),
                    review_url(run.pk, item.pk),
                )
            )
        rows.append(row)
    return Grid(runs, [model_label(run) for run in runs], subject, shown, rows, len(ids))
