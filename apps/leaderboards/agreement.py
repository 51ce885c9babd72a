"""How often a judge agrees with people, over every score a person judged.

A person judges a score by confirming it, overriding it, entering a blind value (their own
value, typed before the judge's was shown: `apps.review.models.BlindEntry`), or, where the
task takes several reviews per item, submitting a review (`apps.review.models.Review`).
Each reviewed score (one item, one subject) counts once, in exactly one of four kinds:

- confirmed: a reviewer confirmed the judge's value; the human value is the judge's value;
- overridden: a reviewer overrode it; the human value is the override;
- by reviews: several people reviewed it; the human value is their consensus or the
  adjudicator's, and none until the score has its reviews (unsettled);
- blind only: nobody confirmed or overrode it, but reviewers entered blind values; the human
  value is theirs when they all entered the same value, else the item is unsettled.

So reviewed = confirmed + overridden + by reviews + blind only. A confirmation or an override
wins over blind entries on the same score because it came last, with the judge's value in
view: it is the value the human-corrected leaderboard uses. Of the reviewed scores, those
where the judge gave no value (judge failed) and the unsettled ones cannot be compared; the
rest are, so compared = reviewed − judge failed − unsettled. Over the compared pairs, per
judge version (a judge's prompt is versioned with it) and subject: agreement, Cohen's κ with
quadratic weights (the scales are ordinal; with two categories, as for MCQ 0/100, it equals
plain κ), the confusion matrix and the mean absolute difference.

Agreement has one definition here and on a judge's alignment page: the judge's value and
people's, each rounded to the steps of the subject's scale (`stats.same_step`), are equal.

Blind entries, and reviews given in blind mode, are kept apart too: `blind_exact` is the share
of them on the judge's step, a measure no anchoring on the judge can inflate.
"""

from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef, Q

from apps.datasets.models import Task
from apps.judges.models import Judge, Score
from apps.leaderboards.stats import (
    categories_for,
    confusion,
    same_step,
    scale_bounds,
    weighted_kappa,
)
from apps.leaderboards.summaries import valued
from apps.review.models import BlindEntry, Review
from apps.runs.models import Run


@dataclass
class Agreement:
    judge: Judge
    subject: str
    reviewed: int = 0  # confirmed + overridden + by_reviews + blind_only
    confirmed: int = 0
    overridden: int = 0
    by_reviews: int = 0  # several reviews per item: their consensus or an adjudicator's value
    blind_only: int = 0
    judge_failed: int = 0  # reviewed, but the judge gave no value: not compared
    unsettled: int = 0  # blind values differ, or reviews still wanted: no human value yet
    compared: int = 0  # reviewed − judge_failed − unsettled: the pairs below
    blind_entries: int = 0  # every blind value (entry or review, per reviewer), whatever else
    blind_compared: int = 0  # blind values on scores with a judge value
    blind_agreeing: int = 0  # of those, on the judge's step of the scale
    exact: float | None = None
    kappa: float | None = None
    categories: list[float] | None = None
    matrix: list[list[int]] = field(default_factory=list)  # rows: judge, columns: human
    mean_abs_diff: float | None = None
    # Made while seeing the judge's value (confirmations always agree, so these read high)…
    anchored: int = 0
    anchored_exact: float | None = None
    # …and made blind (unanchored): each blind entry against the judge's value.
    blind_kappa: float | None = None
    anchored_agreeing: int = 0

    @property
    def blind_exact(self) -> float | None:
        return self.blind_agreeing / self.blind_compared if self.blind_compared else None

    @property
    def matrix_rows(self) -> list[tuple[float, list[int]]]:
        return list(zip(self.categories or [], self.matrix, strict=False))


def blind_values(task: Task) -> dict[int, list[float]]:
    """score id -> the values people gave it without having seen the judge's: blind entries,
    and reviews submitted in blind mode. People type these one by one, so a task has few
    enough to hold in memory."""
    values: dict[int, list[float]] = {}
    scope = {"score__run__task": task, "score__run__kind": Run.Kind.JUDGE}
    for model, extra in ((BlindEntry, {}), (Review, {"blind": True})):
        found = model.objects.filter(**scope, **extra).values_list("score_id", "value")
        for score_id, value in found.iterator(chunk_size=5000):
            values.setdefault(score_id, []).append(float(value))
    return values


def agreement(task: Task) -> list[Agreement]:
    judges = {
        j.pk: j
        for j in Judge.objects.filter(Q(task=task) | Q(judge_runs__run__task=task)).distinct()
    }
    blind = blind_values(task)
    pairs: dict[tuple[int, str], list[tuple[float, float]]] = {}
    blind_pairs: dict[tuple[int, str], list[tuple[float, float]]] = {}
    counts: dict[tuple[int, str], Agreement] = {}
    rows = (
        Score.objects.filter(run__task=task, run__kind=Run.Kind.JUDGE)
        .annotate(
            blind=Exists(BlindEntry.objects.filter(score=OuterRef("pk"))),
            several=Exists(Review.objects.filter(score=OuterRef("pk"))),
        )
        .filter(
            Q(override_value__isnull=False)
            | Q(confirmed_at__isnull=False)
            | Q(blind=True)
            | Q(several=True)
        )
        .values_list(
            "pk",
            "run__judged_with__judge_id",
            "subject",
            "judge_value",
            "override_value",
            "confirmed_at",
            "status",
            "several",
        )
    )
    for (
        score_id,
        judge_id,
        subject,
        judge_value,
        override,
        confirmed_at,
        status,
        several,
    ) in rows.iterator(chunk_size=5000):
        key = (judge_id, subject)
        entry = counts.get(key) or counts.setdefault(key, Agreement(judges[judge_id], subject))
        low, high = scale_bounds(entry.judge.subject(subject) or {})
        entered = blind.get(score_id, [])
        judged = valued(status, judge_value)
        entry.reviewed += 1
        entry.blind_entries += len(entered)
        if judged is not None:
            entry.blind_compared += len(entered)
            entry.blind_agreeing += sum(1 for v in entered if same_step(judged, v, low, high))
            blind_pairs.setdefault(key, []).extend((judged, v) for v in entered)
        human: float | None
        seen = False  # the human value was given with the judge's value in view
        if several:
            entry.by_reviews += 1
            human = override if override is not None else judge_value if confirmed_at else None
        elif override is not None:
            entry.overridden += 1
            human, seen = override, True
        elif confirmed_at is not None:
            entry.confirmed += 1
            human, seen = judge_value, True
        else:
            entry.blind_only += 1
            human = entered[0] if len(set(entered)) == 1 else None
        if judged is None:
            entry.judge_failed += 1
        elif human is None:
            entry.unsettled += 1
        else:
            pairs.setdefault(key, []).append((judged, float(human)))
            if seen:
                entry.anchored += 1
                entry.anchored_agreeing += same_step(judged, float(human), low, high)
    for key, entry in counts.items():
        values = pairs.get(key, [])
        entry.compared = len(values)
        if entry.anchored:
            entry.anchored_exact = entry.anchored_agreeing / entry.anchored
        spec = entry.judge.subject(entry.subject) or {}
        if entered_pairs := blind_pairs.get(key):
            entry.blind_kappa = _kappa(entered_pairs, spec)
        if not values:
            continue
        low, high = scale_bounds(spec)
        judge_side = [j for j, _ in values]
        human_side = [h for _, h in values]
        entry.exact = sum(1 for j, h in values if same_step(j, h, low, high)) / len(values)
        entry.mean_abs_diff = sum(abs(j - h) for j, h in values) / len(values)
        entry.categories = categories_for(judge_side + human_side, spec.get("min"), spec.get("max"))
        if entry.categories:
            matrix = confusion(judge_side, human_side, entry.categories)
            entry.matrix = matrix.tolist()
            entry.kappa = weighted_kappa(matrix, entry.categories)
    return sorted(counts.values(), key=lambda a: (a.judge.name, -a.judge.version, a.subject))


def _kappa(pairs: list[tuple[float, float]], spec: dict) -> float | None:
    """Quadratic-weighted κ of (judge, human) pairs on the subject's categories."""
    judge_side = [j for j, _ in pairs]
    human_side = [h for _, h in pairs]
    categories = categories_for(judge_side + human_side, spec.get("min"), spec.get("max"))
    if not categories:
        return None
    return weighted_kappa(confusion(judge_side, human_side, categories), categories)
