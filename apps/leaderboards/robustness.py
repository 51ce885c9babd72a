"""Robustness deltas (Dynabench): how much each model loses on a perturbed copy of a dataset.

A model here is a generation run over the copy paired with the same endpoint and template
version's run over the original, both judged by the board's judge. Items pair by key (a copy
keeps its original's keys); per subject, each item's difference is perturbed − original, and
the table gives their mean with a 95% t-interval: mean ± t(0.975, n − 1) · sd / √n, sd with
n − 1 (scipy's Student t), cut to the differences the subject's range allows. A t-interval rather than the board's bootstrap: differences of
two scores take few values, and the t-interval is what a person can check by hand.

Failed and missing items count as on the board: at the subject's worst value when strict
(a model that fails on the perturbed item loses the whole scale), left out when answered only
(then an item counts where both runs have a value). Per tag: the copy's tags, so the tag
`perturbed:<name>` gives the difference on the items the perturbation changed.
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from apps.datasets.models import Dataset, Task
from apps.datasets.perturb import PERTURBATIONS
from apps.judges.models import Judge, TaskJudging
from apps.leaderboards import items
from apps.leaderboards.boards import board_runs, judges_with_runs, model_label, pick_judge
from apps.leaderboards.memo import review_state
from apps.leaderboards.stats import LEVEL, Interval, mean_ci
from apps.leaderboards.subjects import SubjectInfo, subject_infos
from apps.runs.models import Run

MODES = ("human", "judge")
SCORINGS = ("strict", "answered")


@dataclass(frozen=True)
class Delta:
    n: int  # paired items
    original: float | None  # mean on the original, over the same items
    perturbed: float | None
    mean: float | None  # mean of perturbed − original
    ci: Interval | None


def t_interval(differences: np.ndarray) -> Interval | None:
    """95% Student-t interval of the mean difference; None below two pairs."""
    n = int(differences.size)
    if n < 2:
        return None
    mean = float(differences.mean())
    sd = float(differences.std(ddof=1))
    half = float(scipy_stats.t.ppf(1 - (1 - LEVEL) / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean - half, mean + half, "t")


def delta(original: np.ndarray, perturbed: np.ndarray, span: float | None = None) -> Delta:
    """Paired values (NaN: no value, already scored the board's way) → their difference. With
    the subject's `span` (max − min), the interval is cut to the differences that can happen,
    [−span, span]: a t-interval on two items reaches far beyond them."""
    both = ~np.isnan(original) & ~np.isnan(perturbed)
    a, b = original[both], perturbed[both]
    if a.size == 0:
        return Delta(0, None, None, None, None)
    differences = b - a
    ci = t_interval(differences)
    if ci is not None and span is not None:
        if ci.low == ci.high:
            # Every difference the same: the t-interval has no width to give (0 [0, 0] on
            # three items); the bounded-mean bound on [−span, span] does (#29.1).
            ci = mean_ci(differences, -span, span)
        else:
            ci = Interval(max(ci.low, -span), min(ci.high, span), ci.method)
    return Delta(int(a.size), float(a.mean()), float(b.mean()), float((b - a).mean()), ci)


@dataclass
class ModelDelta:
    label: str
    original_run: Run  # judge runs
    perturbed_run: Run
    subjects: dict[str, Delta] = field(default_factory=dict)
    tags: dict[str, dict[str, Delta]] = field(default_factory=dict)  # tag → subject → delta


@dataclass
class CopyDeltas:
    copy: Dataset
    original: Dataset
    models: list[ModelDelta] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # models judged on the original only
    tags: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        known = PERTURBATIONS.get(self.copy.perturbation)
        return known.label if known else self.copy.perturbation


@dataclass
class Robustness:
    task: Task
    judges: list[Judge]
    judge: Judge | None
    mode: str = "human"
    scoring: str = "strict"
    subjects: list[SubjectInfo] = field(default_factory=list)
    subject: SubjectInfo | None = None  # the one the summary and tag tables show
    copies: list[CopyDeltas] = field(default_factory=list)

    def summary(self) -> list[tuple[str, list[Delta | None]]]:
        """Per model label, its delta on the chosen subject for each copy (None: not run)."""
        labels = list(dict.fromkeys(m.label for c in self.copies for m in c.models))
        name = self.subject.name if self.subject else ""
        rows = []
        for label in labels:
            cells: list[Delta | None] = []
            for copy in self.copies:
                found = next((m for m in copy.models if m.label == label), None)
                cells.append(found.subjects.get(name) if found else None)
            rows.append((label, cells))
        return rows


def _generation_key(run: Run) -> tuple[int | None, int | None] | None:
    source = run.source_run
    if source is None or source.kind != Run.Kind.GENERATION or source.endpoint_id is None:
        return None
    return (source.endpoint_id, source.template_id)


def scored(values: np.ndarray, info: SubjectInfo, scoring: str) -> np.ndarray:
    if scoring == "strict" and info.worst is not None:
        return np.where(np.isnan(values), info.worst, values)
    return values


def build(
    task: Task,
    judge_id: int | None = None,
    mode: str = "human",
    scoring: str = "strict",
    subject: str | None = None,
) -> Robustness:
    judges = judges_with_runs(task)
    judge = pick_judge(judges, judge_id, default=TaskJudging.of(task.pk).default_judge_id)
    found = Robustness(
        task,
        judges,
        judge,
        mode if mode in MODES else "human",
        scoring if scoring in SCORINGS else "strict",
    )
    if judge is None:
        return found
    found.subjects = subject_infos(judge)
    found.subject = next((s for s in found.subjects if s.name == subject), None) or (
        found.subjects[0] if found.subjects else None
    )
    runs = [r for r in board_runs(task, judge) if _generation_key(r) is not None]
    by_pair: dict[tuple[int, Any], Run] = {}
    for run in runs:  # newest first: the newest judged run of a pair on a dataset counts
        by_pair.setdefault((run.dataset_id, _generation_key(run)), run)
    copies = (
        Dataset.objects.ready()
        .filter(task=task, perturbed_from__isnull=False)
        .select_related("perturbed_from")
        .order_by("perturbed_from__name", "perturbed_from__version", "perturbation", "pk")
    )
    last_event = review_state()
    for copy in copies:
        assert copy.perturbed_from is not None
        entry = CopyDeltas(copy, copy.perturbed_from)
        on_original = {
            key: run for (dataset, key), run in by_pair.items() if dataset == entry.original.pk
        }
        on_copy = {key: run for (dataset, key), run in by_pair.items() if dataset == copy.pk}
        for key, original_run in sorted(on_original.items(), key=lambda e: e[1].pk):
            if key not in on_copy:
                entry.waiting.append(model_label(original_run))
                continue
            entry.models.append(_model(found, entry, original_run, on_copy[key], last_event))
        entry.tags = sorted({t for m in entry.models for t in m.tags})
        found.copies.append(entry)
    return found


def _model(
    found: Robustness, entry: CopyDeltas, original_run: Run, perturbed_run: Run, last_event: int
) -> ModelDelta:
    model = ModelDelta(model_label(original_run), original_run, perturbed_run)
    at_original, at_copy = items.common_positions([entry.original, entry.copy])
    tags = items.dataset_items(entry.copy).tags[at_copy]
    values_o = items.item_values(original_run, found.mode, last_event)
    values_p = items.item_values(perturbed_run, found.mode, last_event)
    size_o = len(items.dataset_items(entry.original).keys)
    size_p = len(items.dataset_items(entry.copy).keys)
    tag_names = sorted({t for text in tags for t in text.strip("|").split("|") if t})
    for info in found.subjects:
        original = scored(
            values_o.get(info.name, np.full(size_o, np.nan))[at_original], info, found.scoring
        )
        perturbed = scored(
            values_p.get(info.name, np.full(size_p, np.nan))[at_copy], info, found.scoring
        )
        span = info.high - info.low if info.has_range else None  # type: ignore[operator]
        model.subjects[info.name] = delta(original, perturbed, span)
        for tag in tag_names:
            mask = items.tag_mask(tags, tag)
            model.tags.setdefault(tag, {})[info.name] = delta(original[mask], perturbed[mask], span)
    return model


def records(found: Robustness) -> Iterator[dict[str, Any]]:
    """One record per copy, model, subject and tag ("" for all items): the export's rows."""
    for entry in found.copies:
        for model in entry.models:
            groups = [("", model.subjects), *model.tags.items()]
            for tag, by_subject in groups:
                for name, value in by_subject.items():
                    yield {
                        "original_dataset": str(entry.original),
                        "original_dataset_id": entry.original.pk,
                        "perturbed_dataset": str(entry.copy),
                        "perturbed_dataset_id": entry.copy.pk,
                        "perturbation": entry.copy.perturbation,
                        "seed": entry.copy.perturbation_seed,
                        "model": model.label,
                        "original_judge_run_id": model.original_run.pk,
                        "perturbed_judge_run_id": model.perturbed_run.pk,
                        "subject": name,
                        "tag": tag,
                        "n": value.n,
                        "original_mean": value.original,
                        "perturbed_mean": value.perturbed,
                        "delta": value.mean,
                        "ci_low": value.ci.low if value.ci else None,
                        "ci_high": value.ci.high if value.ci else None,
                        "values": found.mode,
                        "scoring": found.scoring,
                    }


HEADER = [
    "original_dataset",
    "original_dataset_id",
    "perturbed_dataset",
    "perturbed_dataset_id",
    "perturbation",
    "seed",
    "model",
    "original_judge_run_id",
    "perturbed_judge_run_id",
    "subject",
    "tag",
    "n",
    "original_mean",
    "perturbed_mean",
    "delta",
    "ci_low",
    "ci_high",
    "values",
    "scoring",
]
