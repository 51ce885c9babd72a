"""How often a judge agrees with people, over the scores reviewers confirmed or overrode.

A confirmed score says the human value equals the judge's; an overridden one says the human
value is the override. Per judge version (a judge's prompt is versioned with it) and subject:
exact agreement, Cohen's κ with quadratic weights (the scales are ordinal; with two
categories, as for MCQ 0/100, it equals plain κ), the confusion matrix, and the counts.
"""

from dataclasses import dataclass, field

from django.db.models import Q

from apps.datasets.models import Task
from apps.judges.models import Judge, Score
from apps.leaderboards.stats import categories_for, confusion, weighted_kappa
from apps.runs.models import Run


@dataclass
class Agreement:
    judge: Judge
    subject: str
    reviewed: int = 0  # reviewed scores that have a judge value, compared below
    confirmed: int = 0
    overridden: int = 0
    judge_failed: int = 0  # reviewed (overridden) although the judge gave no value
    exact: float | None = None
    kappa: float | None = None
    categories: list[float] | None = None
    matrix: list[list[int]] = field(default_factory=list)  # rows: judge, columns: human
    mean_abs_diff: float | None = None

    @property
    def matrix_rows(self) -> list[tuple[float, list[int]]]:
        return list(zip(self.categories or [], self.matrix, strict=False))


def agreement(task: Task) -> list[Agreement]:
    judges = {j.pk: j for j in Judge.objects.filter(Q(task=task) | Q(runs__task=task)).distinct()}
    pairs: dict[tuple[int, str], list[tuple[float, float]]] = {}
    counts: dict[tuple[int, str], Agreement] = {}
    rows = (
        Score.objects.filter(run__task=task, run__kind=Run.Kind.JUDGE)
        .reviewed()
        .values_list("run__judge_id", "subject", "judge_value", "override_value", "status")
    )
    for judge_id, subject, judge_value, override, status in rows.iterator(chunk_size=5000):
        key = (judge_id, subject)
        entry = counts.setdefault(key, Agreement(judges[judge_id], subject))
        if override is not None:
            entry.overridden += 1
        else:
            entry.confirmed += 1
        if judge_value is None or status != Score.Status.OK:
            entry.judge_failed += 1
            continue
        human = override if override is not None else judge_value
        pairs.setdefault(key, []).append((float(judge_value), float(human)))
    for key, entry in counts.items():
        values = pairs.get(key, [])
        entry.reviewed = len(values)
        if not values:
            continue
        judge_side = [j for j, _ in values]
        human_side = [h for _, h in values]
        entry.exact = sum(1 for j, h in values if j == h) / len(values)
        entry.mean_abs_diff = sum(abs(j - h) for j, h in values) / len(values)
        spec = entry.judge.subject(entry.subject) or {}
        entry.categories = categories_for(judge_side + human_side, spec.get("min"), spec.get("max"))
        if entry.categories:
            matrix = confusion(judge_side, human_side, entry.categories)
            entry.matrix = matrix.tolist()
            entry.kappa = weighted_kappa(matrix, entry.categories)
    return sorted(counts.values(), key=lambda a: (a.judge.name, -a.judge.version, a.subject))
