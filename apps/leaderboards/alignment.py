"""How well a judge version agrees with people (#14.2): on the held-out items of its checks
(`apps.judges.learning.start_check`), the checked version's values against people's final
values, beside the values people reviewed (the version that judged the reviewed run) on the
same items, with bootstrap CIs, and whether the checked version is closer to people.

Agreement on a subject's scale: accuracy (the same category after rounding to the scale's
integer steps), Cohen's κ and quadratic-weighted κ on those categories, and the mean absolute
difference on the raw values. "Better" needs the paired CI of the difference in mean
absolute difference (checked − before) to lie below 0; otherwise the page says it is not
shown better.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.datasets.models import Task
from apps.judges.models import Judge, JudgeCheck, Score, TaskJudging, judge_of
from apps.leaderboards.memo import Memo, review_state, run_state
from apps.leaderboards.models import BoardSettings
from apps.leaderboards.stats import (
    Interval,
    confusion,
    percentile_ci,
    scale_bounds,
    scale_steps,
    weighted_kappa,
)
from apps.runs.models import Run

RESAMPLES = 2000
SEED = 20261123


def cohen_kappa(matrix: np.ndarray) -> float | None:
    """Unweighted Cohen's κ of a confusion matrix; None where chance agreement is total."""
    total = matrix.sum()
    if total == 0:
        return None
    observed = np.trace(matrix) / total
    expected = float((matrix.sum(axis=1) * matrix.sum(axis=0)).sum()) / total**2
    return None if expected == 1 else float((observed - expected) / (1 - expected))


@dataclass
class Metrics:
    accuracy: float
    accuracy_ci: Interval | None
    kappa: float | None
    weighted_kappa: float | None
    weighted_kappa_ci: Interval | None
    mad: float
    mad_ci: Interval | None


@dataclass
class SubjectCheck:
    subject: str
    n: int
    checked: Metrics
    before: Metrics
    mad_difference: float  # checked − before: below 0 is closer to people
    mad_difference_ci: Interval | None

    before_label: str = "reviewed values"

    @property
    def rows(self) -> list[tuple[str, Metrics]]:
        return [("this version", self.checked), (self.before_label, self.before)]

    @property
    def mad_gap(self) -> float:
        return abs(self.mad_difference)

    @property
    def verdict(self) -> str:
        ci = self.mad_difference_ci
        if ci is not None and ci.high < 0:
            return "better"
        if ci is not None and ci.low > 0:
            return "worse"
        return "not shown better"


@dataclass
class CheckReport:
    judge: Judge
    checks: list[JudgeCheck]
    before: list[str]  # the versions that judged the reviewed runs
    subjects: list[SubjectCheck] = field(default_factory=list)
    items: list[tuple[int, int]] = field(default_factory=list)  # (reviewed run, item) used

    @property
    def running(self) -> bool:
        return any(check.run.is_active for check in self.checks)

    @property
    def held_out(self) -> int:
        return sum(len(check.items) for check in self.checks)


def metrics(judged: np.ndarray, people: np.ndarray, low: float, high: float) -> Metrics:
    categories, (j, p) = scale_steps(low, high, judged, people)
    matrix = confusion(j, p, categories)
    rng = np.random.default_rng(SEED)
    n = len(judged)
    picks = rng.integers(0, n, size=(RESAMPLES, n))
    same = (j == p).astype(float)
    diff = np.abs(judged - people)
    # A resample whose κ is exactly 0 (no better than chance) is a value like any other; only
    # an undefined κ (None: one category used throughout) is left out of the interval.
    found = (
        weighted_kappa(confusion(j[pick], p[pick], categories), categories)
        for pick in picks[:500]  # the κ bootstrap is the slow one: 500 resamples
    )
    kappas = np.array([np.nan if kappa is None else kappa for kappa in found])
    return Metrics(
        accuracy=float(same.mean()),
        accuracy_ci=percentile_ci(same[picks].mean(axis=1)),
        kappa=cohen_kappa(matrix),
        weighted_kappa=weighted_kappa(matrix, categories),
        weighted_kappa_ci=percentile_ci(kappas),
        mad=float(diff.mean()),
        mad_ci=percentile_ci(diff[picks].mean(axis=1)),
    )


def latest_checks(judge: Judge) -> list[JudgeCheck]:
    """The newest check of this version per reviewed run."""
    newest: dict[int, JudgeCheck] = {}
    for check in (
        JudgeCheck.objects.filter(run__judged_with__judge=judge, run__kind=Run.Kind.CHECK)
        .select_related("run", "reviewed_run__judged_with__judge")
        .order_by("pk")
    ):
        newest[check.reviewed_run_id] = check
    return list(newest.values())


def report(judge: Judge) -> CheckReport:
    checks = latest_checks(judge)
    before = sorted({str(judge_of(check.reviewed_run)) for check in checks})
    found = CheckReport(judge, checks, before)
    rows: dict[str, list[tuple[int, int, float, float, float]]] = {}
    for check in checks:
        mine = {
            (item, subject): value
            for item, subject, value in Score.objects.filter(
                run=check.run, status=Score.Status.OK, item_id__in=check.items
            ).values_list("item_id", "subject", "judge_value")
        }
        for item, subject, final, earlier in (
            Score.objects.filter(run=check.reviewed_run, item_id__in=check.items)
            .reviewed()
            .values_list("item_id", "subject", "final_value", "judge_value")
        ):
            value = mine.get((item, subject))
            if value is None or final is None or earlier is None:
                continue  # not judged (yet), or not settled: nothing to compare
            rows.setdefault(subject, []).append(
                (check.reviewed_run_id, item, float(value), float(earlier), float(final))
            )
    for subject in judge.subject_names:
        found_rows = rows.get(subject, [])
        if not found_rows:
            continue
        spec = judge.subject(subject) or {}
        low, high = scale_bounds(spec)
        data = np.array([row[2:] for row in found_rows], dtype=float)
        now, reviewed_values, people = data[:, 0], data[:, 1], data[:, 2]
        difference = np.abs(now - people) - np.abs(reviewed_values - people)
        picks = np.random.default_rng(SEED).integers(
            0, len(difference), size=(RESAMPLES, len(difference))
        )
        found.subjects.append(
            SubjectCheck(
                subject,
                len(found_rows),
                metrics(now, people, low, high),
                metrics(reviewed_values, people, low, high),
                float(difference.mean()),
                percentile_ci(difference[picks].mean(axis=1)),
                ", ".join(before),
            )
        )
        found.items = sorted({(row[0], row[1]) for row in found_rows} | set(found.items))
    return found


# ---- alignment over time (#14.3) ----------------------------------------------------------------
@dataclass
class Period:
    """Judge–human agreement on the scores people reviewed in one version or one week."""

    label: str  # "v2" or the week's Monday, "2026-11-16"
    n: int
    agreement: float  # the judge's value, rounded to the scale's steps, equals people's
    mad: float

    @property
    def percent(self) -> int:
        return round(100 * self.agreement)


@dataclass
class SubjectHistory:
    subject: str
    by_version: list[Period]
    by_week: list[Period]


MIN_WEEK = 5  # reviews a week needs before its agreement can raise the alarm


_histories: Memo[list["SubjectHistory"]] = Memo("agreement histories", size=16)


def history(judge: Judge, this_version: bool = False) -> list[SubjectHistory]:
    """Per subject of the judge, agreement with people by version (every version of the judge,
    or with `this_version` this one alone) and by week of review: the judge's value against
    people's final value on every score people reviewed (overrides and confirmations; failed
    items have no judge value).

    Finding the reviewed scores reads every score of the runs (seconds at 10M), so the answer
    is kept per process by the runs' results and the last score event (every override and
    confirmation leaves one)."""
    runs = Run.objects.filter(
        kind=Run.Kind.JUDGE,
        judged_with__judge__task_id=judge.task_id,
        judged_with__judge__name=judge.name,
    )
    if this_version:
        runs = runs.filter(judged_with__judge=judge)
    key = (judge.pk, this_version, tuple(run_state(run) for run in runs.order_by("pk")))
    return _histories.get_or_compute((*key, review_state()), lambda: _history(judge, runs))


def _history(judge: Judge, runs: QuerySet[Run]) -> list[SubjectHistory]:
    found = []
    rows = (
        Score.objects.filter(run__in=runs, judge_value__isnull=False, final_value__isnull=False)
        .reviewed()
        .values_list("subject", "run__judged_with__judge__version", "judge_value", "final_value")
        .annotate(when=Coalesce("override_at", "confirmed_at"))
    )
    per: dict[str, list[tuple[int, datetime | None, float, float]]] = {}
    for subject, version, value, final, when in rows:
        per.setdefault(subject, []).append((version, when, float(value), float(final)))
    for subject in judge.subject_names:
        entries = per.get(subject, [])
        if not entries:
            continue
        spec = judge.subject(subject) or {}
        low, high = scale_bounds(spec)
        by_version: dict[str, list[tuple[float, float]]] = {}
        by_week: dict[str, list[tuple[float, float]]] = {}
        for version, when, value, final in entries:
            by_version.setdefault(f"v{version}", []).append((value, final))
            if when is not None:
                local = timezone.localtime(when)
                monday = (local - timedelta(days=local.weekday())).date().isoformat()
                by_week.setdefault(monday, []).append((value, final))
        found.append(
            SubjectHistory(
                subject,
                [_period(k, v, low, high) for k, v in sorted(by_version.items(), key=_version)],
                [_period(k, v, low, high) for k, v in sorted(by_week.items())],
            )
        )
    return found


def _version(entry: tuple[str, list[tuple[float, float]]]) -> int:
    return int(entry[0][1:])


def _period(label: str, pairs: list[tuple[float, float]], low: float, high: float) -> Period:
    data = np.array(pairs, dtype=float)
    _, (judged, people) = scale_steps(low, high, data[:, 0], data[:, 1])
    return Period(
        label,
        len(pairs),
        float((judged == people).mean()),
        float(np.abs(data[:, 0] - data[:, 1]).mean()),
    )


@dataclass
class Alarm:
    judge: Judge
    subject: str
    week: Period
    threshold: float


def alarms(task: Task) -> list[Alarm]:
    """The task's default judge's subjects whose agreement with people in the latest week with
    enough reviews (MIN_WEEK) of its own scores fell below the task's threshold."""
    judge = TaskJudging.of(task.pk).default_judge
    threshold = BoardSettings.of(task.pk).alignment_threshold
    if threshold is None or judge is None:
        return []
    found = []
    for entry in history(judge, this_version=True):
        weeks = [week for week in entry.by_week if week.n >= MIN_WEEK]
        if weeks and weeks[-1].agreement < threshold:
            found.append(Alarm(judge, entry.subject, weeks[-1], threshold))
    return found
