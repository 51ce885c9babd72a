"""The pairwise board (#13.4): Bradley–Terry ratings of the response sets a task's pairwise
runs compared, from the judge's battles (each (item, pair) judged in both orders; a flip
between the orders is a tie), with the judge's position consistency beside them."""

from dataclasses import dataclass

from apps.datasets.models import Task
from apps.judges.models import Judge
from apps.judges.pairwise import Consistency, consistency, outcomes
from apps.leaderboards.bradley_terry import Ratings, ratings
from apps.runs.models import Run


@dataclass
class PairwiseBoard:
    task: Task
    judges: list[Judge]
    judge: Judge | None
    ratings: Ratings | None
    consistency: Consistency | None
    labels: dict[str, int]  # model label → its generation run id
    source: str = "judge battles"


def label_of(run: Run) -> str:
    return run.label or f"run #{run.pk}"


def build(task: Task, judge_id: int | None = None) -> PairwiseBoard:
    runs = list(
        Run.objects.filter(task=task, kind=Run.Kind.PAIRWISE)
        .exclude(status=Run.Status.QUEUED)
        .select_related("judge")
        .order_by("-pk")
    )
    judges = sorted({run.judge for run in runs if run.judge}, key=lambda j: (j.name, -j.version))
    judge = next((j for j in judges if j.pk == judge_id), judges[0] if judges else None)
    if judge is None:
        return PairwiseBoard(task, judges, None, None, None, {})
    generation = {r.pk: r for r in Run.objects.generation().filter(task=task)}
    battles = []
    for run in runs:
        if run.judge_id != judge.pk:
            continue
        for found in outcomes(run):
            a, b = label_of(generation[found.a]), label_of(generation[found.b])
            battles.append((a, b, {"a": 1.0, "b": 0.0}.get(found.verdict, 0.5)))
    labels = {label_of(r): r.pk for r in generation.values()}
    return PairwiseBoard(
        task, judges, judge, ratings(battles) if battles else None, consistency(judge), labels
    )
