"""What the results and failed-items pages of a judge run show, in a fixed number of queries.

Per subject: the mean of the final values (the override where there is one) with n, failed
and overridden counts, a distribution, and per-tag means; then the items, filtered by score
range, failed, tag and disagreement between rounds, one page at a time. Every number is a SQL
aggregate, so a run of 100k items costs the same few queries as a run of ten, and a page of
500 items as many queries as a page of 50.
"""

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db.models import (
    Avg,
    Case,
    Count,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Floor

from apps.datasets.models import Item
from apps.judges.models import (
    JudgeRound,
    RunItemQuerySet,
    Score,
    ScoreEvent,
    awaiting_response,
    judge_of,
)
from apps.runs.models import AttemptLog, ErrorKind, Run

EXACT_BARS = 12  # at most this many distinct values: one bar per value, else binned
BINS = 10
PAGE_SIZES = (25, 50, 100, 200, 500)


@dataclass
class Bar:
    label: str
    count: int
    percent: float = 0.0  # of the tallest bar, for the width


@dataclass
class SubjectResult:
    name: str
    low: float | None
    high: float | None
    n: int = 0
    mean: float | None = None
    judge_mean: float | None = None
    failed: int = 0
    overridden: int = 0
    bars: list[Bar] = field(default_factory=list)
    tag_means: dict[str, tuple[float, int]] = field(default_factory=dict)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


CACHE_SECONDS = 3600


def subject_results(run: Run) -> list[SubjectResult]:
    """Kept (in the cache) by the run's results and the last score event: at 100k items × 5
    subjects these aggregates read 500k scores (2 s) on each visit, and only the judging job
    (which moves the results fingerprint) and people's changes (each leaves a ScoreEvent)
    change them."""
    last_event = ScoreEvent.objects.aggregate(last=Max("pk"))["last"] or 0
    key = f"judges:subject-results:{run.results_fingerprint}:{last_event}"
    found = cache.get(key)
    if found is None:
        found = _subject_results(run)
        cache.set(key, found, CACHE_SECONDS)
    return found


def _subject_results(run: Run) -> list[SubjectResult]:
    judge = judge_of(run)
    results = {
        s["name"]: SubjectResult(s["name"], _number(s.get("min")), _number(s.get("max")))
        for s in judge.subjects
    }
    rows = (
        Score.objects.filter(run=run)
        .values("subject")
        .annotate(
            n=Count("final_value"),
            mean=Avg("final_value"),
            judge_mean=Avg("judge_value", filter=Q(status=Score.Status.OK)),
            failed=Count("pk", filter=Q(status=Score.Status.FAILED)),
            overridden=Count("override_value"),
            distinct=Count("final_value", distinct=True),
        )
        .order_by()
    )
    distinct: dict[str, int] = {}
    for row in rows:
        result = results.setdefault(row["subject"], SubjectResult(row["subject"], None, None))
        result.n, result.mean, result.judge_mean = row["n"], row["mean"], row["judge_mean"]
        result.failed, result.overridden = row["failed"], row["overridden"]
        distinct[row["subject"]] = row["distinct"]
    _distributions(run, results, distinct)
    _tag_means(run, results)
    return list(results.values())


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _distributions(run: Run, results: dict[str, SubjectResult], distinct: dict[str, int]) -> None:
    """One bar per value when a subject takes few values (1–5 ratings, 0/100 choices), else
    ten equal bins over the subject's range (the observed range when it declares none)."""
    few = [name for name, count in distinct.items() if 0 < count <= EXACT_BARS]
    scored = Score.objects.filter(run=run, final_value__isnull=False)
    if few:
        counts = (
            scored.filter(subject__in=few)
            .values_list("subject", "final_value")
            .annotate(count=Count("pk"))
            .order_by("subject", "final_value")
        )
        for subject, value, count in counts:
            results[subject].bars.append(Bar(_fmt(value), count))
    for name, count in distinct.items():
        if count <= EXACT_BARS:
            continue
        result = results[name]
        low, high = result.low, result.high
        if low is None or high is None or high <= low:
            low, high = _observed(scored.filter(subject=name))
        width = (high - low) / BINS or 1.0
        bins = (
            scored.filter(subject=name)
            .annotate(bin=Floor(Cast(F("final_value") - low, FloatField()) / width))
            .values_list("bin")
            .annotate(count=Count("pk"))
            .order_by("bin")
        )
        counts_by_bin: dict[int, int] = defaultdict(int)
        for index, count in bins:
            counts_by_bin[min(max(int(index), 0), BINS - 1)] += count
        for index in range(BINS):
            start = low + index * width
            label = f"{_fmt(start)}–{_fmt(start + width)}"
            result.bars.append(Bar(label, counts_by_bin.get(index, 0)))
    for result in results.values():
        tallest = max((bar.count for bar in result.bars), default=0)
        for bar in result.bars:
            bar.percent = round(100 * bar.count / tallest, 1) if tallest else 0.0


def _observed(scores: QuerySet[Score]) -> tuple[float, float]:
    bounds = scores.aggregate(lo=Min("final_value"), hi=Max("final_value"))
    low, high = bounds["lo"] or 0.0, bounds["hi"] or 0.0
    return (low, high) if high > low else (low, low + 1.0)


def _tag_means(run: Run, results: dict[str, SubjectResult]) -> None:
    """Per tag and subject: the mean of the final values of the items carrying the tag.

    Grouped by the items' tag sets in SQL (few distinct sets), then summed per tag here.
    """
    rows = (
        Score.objects.filter(run=run, final_value__isnull=False)
        .values_list("subject", "item__tags_text")
        .annotate(n=Count("pk"), total=Sum("final_value"))
        .order_by()
    )
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for subject, text, n, total in rows:
        for tag in (text or "").strip("|").split("|"):
            if tag:
                entry = sums[(subject, tag)]
                entry[0] += total
                entry[1] += n
    for (subject, tag), (total, n) in sorted(sums.items()):
        if subject in results and n:
            results[subject].tag_means[tag] = (total / n, int(n))


def run_tags(run: Run) -> list[str]:
    return sorted((run.dataset.tag_counts or {}).keys())


def tag_table(summaries: list[SubjectResult]) -> list[tuple[str, list[tuple[float, int] | None]]]:
    """Rows of the per-tag table: each tag that has scores, with its (mean, n) per subject."""
    tags = sorted({tag for s in summaries for tag in s.tag_means})
    return [(tag, [s.tag_means.get(tag) for s in summaries]) for tag in tags]


# ---- the items table ---------------------------------------------------------------------------
@dataclass
class ItemFilters:
    subject: str = ""
    low: float | None = None
    high: float | None = None
    status: str = ""  # "", ok, failed, pending
    tag: str = ""
    disagree: bool = False
    flaky: bool = False  # epochs (repeated generations) disagree
    doubtful: bool = False  # the task's rule says a person should look (#14.4)
    per_page: int = 50

    @classmethod
    def from_query(cls, params: Any, subjects: list[str]) -> "ItemFilters":
        def number(name: str) -> float | None:
            return _number((params.get(name) or "").strip() or None)

        per_page = params.get("per_page", "")
        subject = params.get("subject", "")
        return cls(
            subject=subject if subject in subjects else (subjects[0] if subjects else ""),
            low=number("min"),
            high=number("max"),
            status=params.get("status", "")
            if params.get("status") in ("ok", "failed", "pending")
            else "",
            tag=params.get("tag", "").strip(),
            disagree=params.get("disagree") == "1",
            flaky=params.get("flaky") == "1",
            doubtful=params.get("doubtful") == "1",
            per_page=int(per_page) if per_page.isdigit() and int(per_page) in PAGE_SIZES else 50,
        )

    def query(self) -> dict[str, str]:
        out = {
            "subject": self.subject,
            "min": "" if self.low is None else f"{self.low:g}",
            "max": "" if self.high is None else f"{self.high:g}",
            "status": self.status,
            "tag": self.tag,
            "disagree": "1" if self.disagree else "",
            "flaky": "1" if self.flaky else "",
            "doubtful": "1" if self.doubtful else "",
            "per_page": str(self.per_page),
        }
        return {k: v for k, v in out.items() if v}


def filtered_items(run: Run, filters: ItemFilters) -> RunItemQuerySet:
    """Items of the run's dataset under the filters (each state as the review list means it)."""
    items = RunItemQuerySet.of(run).in_state(filters.status)
    items = items.scored_between(filters.subject, filters.low, filters.high)
    if filters.disagree:
        items = items.disagreeing()
    if filters.flaky:
        items = items.flaky()
    if filters.doubtful:
        items = items.doubtful()
    return items.tagged(filters.tag)


@dataclass
class ItemRow:
    item: Item
    scores: list[Score | None]
    failed: bool
    spread: float


def items_page(run: Run, filters: ItemFilters, number: Any) -> tuple[Page, list[ItemRow]]:
    """One page of items with their scores: four queries whatever the page size."""
    items = filtered_items(run, filters).order_by("position").only("id", "key", "position", "tags")
    page = Paginator(items, filters.per_page).get_page(number)
    ids = [item.pk for item in page]
    by_item: dict[int, dict[str, Score]] = defaultdict(dict)
    for score in Score.objects.filter(run_id=run.pk, item_id__in=ids).defer(
        "override_reason", "error"
    ):
        by_item[score.item_id][score.subject] = score
    failed = set(RunItemQuerySet.of(run).failed().filter(pk__in=ids).values_list("pk", flat=True))
    names = judge_of(run).subject_names
    rows = []
    for item in page:
        scores = by_item.get(item.pk, {})
        rows.append(
            ItemRow(
                item=item,
                scores=[scores.get(name) for name in names],
                failed=item.pk in failed,
                spread=max((s.spread for s in scores.values()), default=0.0),
            )
        )
    return page, rows


# ---- the failed items page --------------------------------------------------------------------
@dataclass
class FailedRound:
    round: JudgeRound
    log: AttemptLog | None  # the last failed attempt of the round, when logged


@dataclass
class FailedItem:
    score: Score
    rounds: list[FailedRound]


@dataclass
class FailedGroup:
    """The failed items of one error kind: counts over the whole run, items of this page."""

    kind: str
    label: str
    count: int
    retryable: int  # how many of them judging again may fix (Score.retryable)
    items: list[FailedItem] = field(default_factory=list)

    @property
    def no_response(self) -> bool:
        return self.kind == ErrorKind.NO_RESPONSE


def _failed_scores(run: Run) -> QuerySet[Score]:
    """One failed Score per failed item (every subject carries the item's error)."""
    return Score.objects.filter(
        run=run, subject=judge_of(run).subject_names[0], status=Score.Status.FAILED
    )


def failed_groups(run: Run) -> list[FailedGroup]:
    """Every error kind of the run's failed items with its counts, most frequent first."""
    waiting = awaiting_response(run)
    rows = (
        _failed_scores(run)
        .values_list("error_kind")
        .annotate(count=Count("pk"), waiting=Count("pk", filter=waiting))
        .order_by("-count", "error_kind")
    )
    labels = dict(ErrorKind.choices)
    return [
        FailedGroup(kind, labels.get(kind, kind or "Failed"), count, count - waiting)
        for kind, count, waiting in rows
    ]


def failed_page(
    run: Run, groups: list[FailedGroup], error_kind: str, number: Any, per_page: int = 100
) -> Page:
    """A page of failed items, one error kind after another (the groups' order), each with
    its failed rounds and their last logged attempts (what was sent, the raw reply, the
    traceback), filled into `groups`: four queries per page."""
    scores = _failed_scores(run).select_related("item")
    if error_kind:
        scores = scores.filter(error_kind=error_kind)
    rank = Case(
        *(When(error_kind=g.kind, then=Value(i)) for i, g in enumerate(groups)),
        default=Value(len(groups)),
        output_field=IntegerField(),
    )
    page = Paginator(scores.order_by(rank, "item__position"), per_page).get_page(number)
    ids = [score.item_id for score in page]
    rounds: dict[int, list[JudgeRound]] = defaultdict(list)
    for judge_round in JudgeRound.objects.filter(
        run=run, item_id__in=ids, status=JudgeRound.Status.FAILED
    ).order_by("round"):
        rounds[judge_round.item_id].append(judge_round)
    logs: dict[tuple[int | None, int | None], AttemptLog] = {}
    for log in AttemptLog.objects.filter(run=run, item_id__in=ids, ok=False).order_by("pk"):
        logs[(log.item_id, log.round)] = log  # the last one wins
    by_kind = {group.kind: group for group in groups}
    for score in page:
        failed = [
            FailedRound(r, logs.get((score.item_id, r.round)) or logs.get((score.item_id, None)))
            for r in rounds.get(score.item_id, [])
        ]
        group = by_kind.get(score.error_kind)
        if group is None:  # failed after the counts were taken
            group = by_kind[score.error_kind] = FailedGroup(score.error_kind, "Failed", 0, 0)
            groups.append(group)
        group.items.append(FailedItem(score, failed))
    return page
