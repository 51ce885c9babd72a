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

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from django.db import connection, transaction
from django.db.models import Count, Max, Q

from apps.datasets.models import Task
from apps.judges.models import Judge, JudgeRun, Score, ScoreEvent
from apps.leaderboards.memo import Memo, review_state, run_state
from apps.leaderboards.people import PeopleAgreement, people_agreement
from apps.leaderboards.stats import (
    categories_for,
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


# Counted in SQL, grouped by what decides a reviewed score's kind and pair: a task with 10M
# scores and 1 % of them reviewed has 200k reviewed scores but only a few thousand distinct
# groups. A reviewed score holds an override or a confirmation (each made through
# `Score._apply` or `confirm_many`, which leave a ScoreEvent), a blind entry or a review, so
# it is looked up through those tables' score ids (index lookups), never by scanning the
# task's scores.
_REVIEWED = """
WITH blind AS (
    SELECT score_id, COUNT(*) AS n, MIN(value) AS low, MAX(value) AS high FROM (
        SELECT score_id, value FROM {blind_entry}
        UNION ALL SELECT score_id, value FROM {review} WHERE blind = %s
    ) entered GROUP BY score_id
)
SELECT jr.judge_id, s.subject, s.status, s.judge_value, s.override_value,
    s.confirmed_at IS NOT NULL,
    EXISTS (SELECT 1 FROM {review} rv WHERE rv.score_id = s.id),
    b.n, b.low, b.high, COUNT(*)
FROM {score} s
JOIN {run} r ON r.id = s.run_id
JOIN {judge_run} jr ON jr.run_id = r.id
LEFT JOIN blind b ON b.score_id = s.id
WHERE r.task_id = %s AND r.kind = %s
    AND s.id IN (
        SELECT score_id FROM {event} UNION SELECT score_id FROM {review}
        UNION SELECT score_id FROM {blind_entry}
    )
    AND (s.override_value IS NOT NULL OR s.confirmed_at IS NOT NULL
        OR EXISTS (SELECT 1 FROM {blind_entry} be WHERE be.score_id = s.id)
        OR EXISTS (SELECT 1 FROM {review} rv WHERE rv.score_id = s.id))
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
"""

# Every blind value (entry, or review given in blind mode) beside its score's judge value.
_BLIND = """
SELECT jr.judge_id, s.subject, s.status, s.judge_value, entered.value, COUNT(*)
FROM (
    SELECT score_id, value FROM {blind_entry}
    UNION ALL SELECT score_id, value FROM {review} WHERE blind = %s
) entered
JOIN {score} s ON s.id = entered.score_id
JOIN {run} r ON r.id = s.run_id
JOIN {judge_run} jr ON jr.run_id = r.id
WHERE r.task_id = %s AND r.kind = %s
GROUP BY 1, 2, 3, 4, 5
"""

Pairs = dict[tuple[float, float], int]  # (judge value, human value) → how many scores

_pages: Memo[tuple[list["Agreement"], PeopleAgreement]] = Memo("agreement pages", size=16)


def state(task: Task) -> tuple:
    """What the page's numbers depend on: the task's judge runs' results (a re-judge, a run
    deleted), the score events (overrides, confirmations, reverts, consensus), and the
    reviews and blind entries (added; deleted with their score or reviewer). A few index
    lookups."""
    runs = Run.objects.filter(task=task, kind=Run.Kind.JUDGE).order_by("pk")
    entered = (
        tuple(model.objects.aggregate(last=Max("pk"), n=Count("pk")).values())
        for model in (Review, BlindEntry)
    )
    return (task.pk, tuple(run_state(run) for run in runs), review_state(), *entered)


def page(task: Task) -> tuple[list["Agreement"], PeopleAgreement]:
    """The judge's agreement with people and people's with each other, per process until
    what they depend on changes (`state`)."""
    return _pages.get_or_compute(state(task), lambda: _computed(task))


def _computed(task: Task) -> tuple[list["Agreement"], PeopleAgreement]:
    # PostgreSQL compiles these few large queries with JIT (their cost is over its threshold):
    # a quarter to a third of the first request (0.5 s of 1.9 s on 2M scores), for nothing.
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
        return agreement(task), people_agreement(task)


def _sql(template: str) -> str:
    return template.format(
        blind_entry=BlindEntry._meta.db_table,
        review=Review._meta.db_table,
        score=Score._meta.db_table,
        run=Run._meta.db_table,
        judge_run=JudgeRun._meta.db_table,
        event=ScoreEvent._meta.db_table,
    )


def _rows(template: str, task: Task) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(_sql(template), [True, task.pk, Run.Kind.JUDGE])
        return cursor.fetchall()


def agreement(task: Task) -> list[Agreement]:
    judges = {
        j.pk: j
        for j in Judge.objects.filter(Q(task=task) | Q(judge_runs__run__task=task)).distinct()
    }
    pairs: dict[tuple[int, str], Pairs] = {}
    blind_pairs: dict[tuple[int, str], Pairs] = {}
    counts: dict[tuple[int, str], Agreement] = {}

    def entry_of(key: tuple[int, str]) -> Agreement:
        return counts.get(key) or counts.setdefault(key, Agreement(judges[key[0]], key[1]))

    for row in _rows(_REVIEWED, task):
        judge_id, subject, status, judge_value, override, confirmed, several = row[:7]
        blind_n, blind_low, blind_high, n = row[7:]
        entry = entry_of((judge_id, subject))
        low, high = scale_bounds(entry.judge.subject(subject) or {})
        judged = valued(status, judge_value)
        entry.reviewed += n
        human: float | None
        seen = False  # the human value was given with the judge's value in view
        if several:
            entry.by_reviews += n
            human = override if override is not None else judge_value if confirmed else None
        elif override is not None:
            entry.overridden += n
            human, seen = override, True
        elif confirmed:
            entry.confirmed += n
            human, seen = judge_value, True
        else:
            entry.blind_only += n
            # Everyone who entered a value blind entered the same one.
            human = blind_low if blind_n and blind_low == blind_high else None
        if judged is None:
            entry.judge_failed += n
        elif human is None:
            entry.unsettled += n
        else:
            found = pairs.setdefault((judge_id, subject), {})
            pair = (judged, float(human))
            found[pair] = found.get(pair, 0) + n
            if seen:
                entry.anchored += n
                entry.anchored_agreeing += n * same_step(judged, float(human), low, high)
    for judge_id, subject, status, judge_value, value, n in _rows(_BLIND, task):
        entry = entry_of((judge_id, subject))
        entry.blind_entries += n
        if (judged := valued(status, judge_value)) is None:
            continue
        low, high = scale_bounds(entry.judge.subject(subject) or {})
        entry.blind_compared += n
        entry.blind_agreeing += n * same_step(judged, float(value), low, high)
        found = blind_pairs.setdefault((judge_id, subject), {})
        found[judged, float(value)] = found.get((judged, float(value)), 0) + n
    for key, entry in counts.items():
        values = pairs.get(key, {})
        entry.compared = sum(values.values())
        if entry.anchored:
            entry.anchored_exact = entry.anchored_agreeing / entry.anchored
        spec = entry.judge.subject(entry.subject) or {}
        if entered_pairs := blind_pairs.get(key):
            entry.blind_kappa = _kappa(entered_pairs, spec)
        if not values:
            continue
        low, high = scale_bounds(spec)
        entry.exact = (
            sum(n for (j, h), n in values.items() if same_step(j, h, low, high)) / entry.compared
        )
        # As the sum of every pair's difference, exactly rounded once.
        differences = (itertools.repeat(abs(j - h), n) for (j, h), n in values.items())
        entry.mean_abs_diff = math.fsum(itertools.chain.from_iterable(differences)) / (
            entry.compared
        )
        entry.categories = _categories(values, spec)
        if entry.categories:
            matrix = _confusion(values, entry.categories)
            entry.matrix = matrix.tolist()
            entry.kappa = weighted_kappa(matrix, entry.categories)
    return sorted(counts.values(), key=lambda a: (a.judge.name, -a.judge.version, a.subject))


def _categories(pairs: Pairs, spec: dict) -> list[float] | None:
    observed = [j for j, _ in pairs] + [h for _, h in pairs]
    return categories_for(observed, spec.get("min"), spec.get("max"))


def _confusion(pairs: Pairs, categories: list[float]) -> np.ndarray:
    """counts[i][j]: how many scores the judge put in categories[i] and people in [j]."""
    index = {float(c): i for i, c in enumerate(categories)}
    matrix = np.zeros((len(categories), len(categories)), dtype=np.int64)
    for (judged, human), n in pairs.items():
        matrix[index[judged], index[human]] += n
    return matrix


def _kappa(pairs: Pairs, spec: dict) -> float | None:
    """Quadratic-weighted κ of (judge, human) pairs on the subject's categories."""
    categories = _categories(pairs, spec)
    if not categories:
        return None
    return weighted_kappa(_confusion(pairs, categories), categories)
