"""Two runs on the same items: wins / losses / ties, paired bootstrap CI, paired tests, and the
items where they differ most (each linking to its review page)."""

import re
from dataclasses import dataclass, field

import numpy as np
from django.urls import NoReverseMatch, reverse

from apps.datasets.models import Item
from apps.judges.models import Score
from apps.leaderboards import sequential
from apps.leaderboards.memo import Memo, review_state, run_state
from apps.leaderboards.stats import Paired, items_needed, paired
from apps.leaderboards.subjects import SubjectInfo, subject_infos
from apps.runs.models import Run

TOP = 10


def natural_key(key: str) -> tuple[tuple[int, int | str], ...]:
    """Item keys in the order people count: "2" before "10" before "102", "q9" before "q10".
    Runs of digits compare as numbers, the rest as text (each part tagged, so a number and a
    text part never meet in a comparison)."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", key) if part
    )


def review_url(judge_run_id: int, item_id: int) -> str:
    """The review page of one item of a judge run (the run page until the review app has it)."""
    try:
        return reverse("review:item", args=[judge_run_id, item_id])
    except NoReverseMatch:
        return reverse("runs:detail", args=[judge_run_id])


def item_values(
    run: Run, mode: str, subject: str | None = None
) -> dict[str, dict[str, tuple[int, float | None]]]:
    """subject -> item key -> (item id, value or None when the item failed); every subject, or
    only `subject`."""
    out: dict[str, dict[str, tuple[int, float | None]]] = {}
    scores = Score.objects.filter(run_id=run.pk)
    if subject is not None:
        scores = scores.filter(subject=subject)
    rows = scores.values_list(
        "subject", "item__key", "item_id", "status", "judge_value", "override_value"
    )
    for subject, key, item_id, status, judge, override in rows.iterator(chunk_size=5000):
        value = judge if status == Score.Status.OK else None
        if mode == "human" and override is not None:
            value = override
        out.setdefault(subject, {})[key] = (item_id, value)
    return out


def _read(
    run: Run, mode: str
) -> tuple[dict[str, dict[str, tuple[int, float | None]]], dict[tuple[str, str], int]]:
    """item_values and arrival of a run in one pass over its scores, the item keys read once
    from the dataset rather than joined row by row."""
    keys = dict(Item.objects.filter(dataset_id=run.dataset_id).values_list("pk", "key"))
    values: dict[str, dict[str, tuple[int, float | None]]] = {}
    arrived: dict[tuple[str, str], int] = {}
    rows = Score.objects.filter(run_id=run.pk).values_list(
        "subject", "item_id", "status", "judge_value", "override_value", "pk"
    )
    for subject, item_id, status, judge, override, pk in rows.iterator(chunk_size=10000):
        key = keys.get(item_id)
        if key is None:  # not an item of the run's dataset (never made so): as item_values
            return item_values(run, mode), arrival(run)
        value = judge if status == Score.Status.OK else None
        if mode == "human" and override is not None:
            value = override
        values.setdefault(subject, {})[key] = (item_id, value)
        arrived[subject, key] = pk
    return values, arrived


def arrival(run: Run) -> dict[tuple[str, str], int]:
    """(subject, item key) → the id of the item's score: ids grow as results are written, so
    the later of two runs' ids says when a pair of values was complete."""
    rows = Score.objects.filter(run_id=run.pk).values_list("subject", "item__key", "pk")
    return {(subject, key): pk for subject, key, pk in rows.iterator(chunk_size=5000)}


@dataclass(frozen=True)
class Sequential:
    """The anytime-valid confidence sequence of A − B over the paired items in the order their
    pairs were complete (apps.leaderboards.sequential): valid at every look, unlike the
    fixed-sample interval beside it, so a comparison may be stopped when it has decided."""

    n: int
    mean: float
    low: float
    high: float
    state: str  # sequential.BETTER / WORSE / EQUIVALENT / GOING at the first deciding item
    decided_at: int | None  # the paired item at which it decided (None: keep going)
    delta: float  # "no difference larger than δ" (0: only "A or B better" can decide)
    horizon: int  # items where the sequence is tightest: the dataset's size
    # Two of its intervals (from MIN_ITEMS on) share no value: impossible, bar a 5 % chance,
    # for results arriving in random order, so the order is not random (easy items first…).
    disjoint: bool = False

    @property
    def label(self) -> str:
        return sequential.DECISIONS[self.state]


def sequential_of(
    diffs: np.ndarray, delta: float | None, horizon: int, higher_is_better: bool = True
) -> Sequential | None:
    if len(diffs) == 0:
        return None
    horizon = max(horizon, len(diffs), sequential.MIN_ITEMS)
    seq = sequential.running(diffs, horizon)
    state, at = sequential.first_decision(
        diffs, delta or 0.0, horizon, higher_is_better=higher_is_better
    )
    return Sequential(
        n=len(diffs),
        mean=float(seq.mean[-1]),
        low=float(seq.low[-1]),
        high=float(seq.high[-1]),
        state=state,
        decided_at=at,
        delta=delta or 0.0,
        horizon=horizon,
        disjoint=bool(
            len(diffs) >= sequential.MIN_ITEMS
            and seq.low[sequential.MIN_ITEMS - 1 :].max()
            > seq.high[sequential.MIN_ITEMS - 1 :].min()
        ),
    )


def span_of(info: SubjectInfo | None) -> float | None:
    """The width of a subject's declared range (None without one)."""
    if info is None or not info.has_range:
        return None
    return float(info.high) - float(info.low)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Difference:
    key: str
    a: float
    b: float
    diff: float
    url_a: str
    url_b: str


@dataclass
class SubjectComparison:
    subject: str
    result: Paired
    # With result.n they add up to the items either run scored: a value in A only (B failed
    # or has no score), in B only, or in neither (failed in both, or failed in one and
    # unscored in the other).
    only_a: int
    only_b: int
    neither: int
    largest: list[Difference] = field(default_factory=list)
    wanted: float | None = None  # a difference the user wants to be able to detect
    sequential: Sequential | None = None

    @property
    def items_needed(self) -> int | None:
        """Paired items needed to detect `wanted` (at the observed spread of differences)."""
        if self.wanted is None or self.result.sd_diff is None:
            return None
        return items_needed(self.result.sd_diff, self.wanted)


def compare(
    run_a: Run,
    run_b: Run,
    mode: str = "human",
    subjects: list[str] | None = None,
    delta: float | None = None,
) -> list[SubjectComparison]:
    """Items are paired by key, so two runs over the same dataset (or two versions of it that
    share keys) compare item by item. `delta`: the margin of "no difference larger than δ".

    Kept per process by what it depends on: both runs' results and, for people's values, the
    last score event (every override leaves one)."""
    key = (
        (run_a.pk, run_state(run_a)),
        (run_b.pk, run_state(run_b)),
        mode,
        tuple(subjects) if subjects is not None else None,
        delta,
        review_state() if mode == "human" else None,
    )
    return _compared.get_or_compute(key, lambda: _compare(run_a, run_b, mode, subjects, delta))


_compared: Memo[list[SubjectComparison]] = Memo("comparisons", size=16)


def _compare(
    run_a: Run, run_b: Run, mode: str, subjects: list[str] | None, delta: float | None
) -> list[SubjectComparison]:
    (values_a, arrived_a), (values_b, arrived_b) = _read(run_a, mode), _read(run_b, mode)
    horizon = max(run_a.dataset.row_count, run_b.dataset.row_count)
    names = subjects or [s for s in values_a if s in values_b]
    # A subject's declared range bounds the differences (for the interval at the edges).
    judged_with = getattr(run_a, "judged_with", None)
    infos = {i.name: i for i in subject_infos(judged_with.judge)} if judged_with else {}
    out = []
    for subject in names:
        a, b = values_a.get(subject, {}), values_b.get(subject, {})
        keys = sorted(set(a) & set(b))
        both = [k for k in keys if a[k][1] is not None and b[k][1] is not None]
        xs = np.array([a[k][1] for k in both], dtype=float)
        ys = np.array([b[k][1] for k in both], dtype=float)
        comparison = SubjectComparison(
            subject=subject,
            result=paired(xs, ys, span_of(infos.get(subject))),
            only_a=sum(1 for k in a if a[k][1] is not None and (k not in b or b[k][1] is None)),
            only_b=sum(1 for k in b if b[k][1] is not None and (k not in a or a[k][1] is None)),
            neither=sum(
                1
                for k in set(a) | set(b)
                if a.get(k, (0, None))[1] is None and b.get(k, (0, None))[1] is None
            ),
        )
        if both:
            diff = xs - ys
            # The pairs in the order they were complete: what a watcher of a running pair saw.
            completed = np.fromiter(
                (max(arrived_a[subject, k], arrived_b[subject, k]) for k in both),
                dtype=np.int64,
                count=len(both),
            )
            arrived = np.argsort(completed, kind="stable")
            info = infos.get(subject)
            comparison.sequential = sequential_of(
                diff[arrived], delta, horizon, info.higher_is_better if info else True
            )
            comparison.largest = [
                Difference(
                    key=both[i],
                    a=float(xs[i]),
                    b=float(ys[i]),
                    diff=float(diff[i]),
                    url_a=review_url(run_a.pk, a[both[i]][0]),
                    url_b=review_url(run_b.pk, b[both[i]][0]),
                )
                for i in _largest(diff, both)
            ]
        out.append(comparison)
    return out


def _largest(diff: np.ndarray, keys: list[str]) -> list[int]:
    """Positions of the TOP largest differences (none of 0), ties in the order people count
    keys: as sorting every item by (−|difference|, natural_key), with keys only compared among
    the candidates at or above the TOP-th largest (100k natural keys take seconds)."""
    size = np.abs(diff)
    candidates = np.flatnonzero(size > 0)
    if len(candidates) > TOP:
        cutoff = np.partition(size[candidates], len(candidates) - TOP)[len(candidates) - TOP]
        candidates = candidates[size[candidates] >= cutoff]
    ranked = sorted(candidates.tolist(), key=lambda i: (-size[i], natural_key(keys[i])))
    return ranked[:TOP]
