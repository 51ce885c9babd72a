"""The task leaderboard: models under one judge, per subject mean / 95% CI / n / failed /
overridden, judge-only beside human-corrected, weights, sorting, per-tag breakdown, chart.

Rows are built from `summaries` (never from every score), so the page, its CSV, its JSONL
and the `leaderboard` command all read the same `Board` and print the same numbers.
"""

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from apps.datasets.models import Dataset, Task
from apps.judges.models import Judge, TaskJudging
from apps.leaderboards import corpus, costs, gaps, items, memo, summaries, turns
from apps.leaderboards.corpus import CorpusCell
from apps.leaderboards.costs import ModelCost
from apps.leaderboards.epochs import Reduction
from apps.leaderboards.items import doubtful_count, flaky_count
from apps.leaderboards.memo import Memo, review_state
from apps.leaderboards.stats import (
    Dist,
    Interval,
    bounded_ci,
    clustered_ci,
    mean_ci,
    percentile_ci,
    resampled_column_means,
)
from apps.leaderboards.subjects import SubjectInfo, as_number, subject_infos
from apps.runs.models import Run

if TYPE_CHECKING:
    from apps.leaderboards.corrected import Corrected

MODES = ("human", "judge")
VALUE_VIEWS = ("both", "human", "judge")
# How failed and missing items count: at the worst value of the subject's range ("strict", so
# failing never helps a model), or not at all ("answered", the mean over answered items).
SCORINGS = ("strict", "answered")
STATS = ("mean", "judge", "n", "failed", "missing", "overridden", "coverage", "answered_mean")
TAG_CI_LIMIT = 200  # tag tables with more cells show means without intervals


# ---- models on the board ----------------------------------------------------------------
def judges_with_runs(task: Task) -> list[Judge]:
    return list(
        Judge.objects.filter(task=task, judge_runs__run__kind=Run.Kind.JUDGE)
        .distinct()
        .order_by("name", "-version")
    )


def pick_judge(
    judges: list[Judge],
    judge_id: int | None = None,
    name: str | None = None,
    version: int | None = None,
    default: int | None = None,
) -> Judge | None:
    """The judge asked for by name (None if it has no runs here), else by id (a stale or
    foreign id falls back), else the task's default judge, else the first (newest version)."""
    if name is not None:
        # Judges come newest version first, so without a version the newest wins.
        return next((j for j in judges if j.name == name and version in (None, j.version)), None)
    for judge in judges:
        if judge.pk == judge_id:
            return judge
    for judge in judges:
        if judge.pk == default:
            return judge
    return judges[0] if judges else None


def model_label(run: Run) -> str:
    if run.label:
        return run.label
    if (source := run.source_run) is not None:
        if source.label:
            return source.label
        return source.endpoint.model if source.endpoint is not None else f"run #{source.pk}"
    if run.source_column:
        return f"{run.source_column} ({run.dataset.name} v{run.dataset.version})"
    return f"run #{run.pk}"


def board_runs(task: Task, judge: Judge, dataset_id: int | None = None) -> list[Run]:
    """One judge run per model (response set): the newest that has started."""
    runs = (
        Run.objects.judging()
        .filter(task=task, judged_with__judge=judge)
        .exclude(status=Run.Status.QUEUED)
        .select_related("dataset", "endpoint", "judged_with__judge", "source_run__endpoint")
        .order_by("-pk")
    )
    if dataset_id is not None:
        runs = runs.filter(dataset_id=dataset_id)
    seen: set[tuple] = set()
    chosen = []
    for run in runs:
        source = (
            ("run", run.source_run_id)
            if run.source_run_id
            else ("column", run.dataset_id, run.source_column)
        )
        if source not in seen:
            seen.add(source)
            chosen.append(run)
    return chosen


# ---- the board --------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One subject of one model in one mode, scored the board's way (`Params.scoring`)."""

    mean: float | None  # strict where the subject has a range, else over answered items
    ci: Interval | None
    n: int  # items in the mean (strict: every item of the dataset)
    failed: int  # items whose scoring failed
    missing: int  # items of the dataset without a score (not judged yet)
    overridden: int
    answered_mean: float | None = None  # over the items with a value only
    strict_mean: float | None = None  # failed and missing at the worst value; None: no range
    coverage: float | None = None  # answered / (answered + failed + missing)
    answered: int = 0  # items with a value


def score_cell(
    dist: Dist,
    failed: int,
    missing: int,
    overridden: int,
    info: SubjectInfo,
    scoring: str,
    with_ci: bool = True,
) -> Cell:
    """A cell from the answered values: strict adds the failed and missing items at the
    subject's worst value, so a model never gains by failing an item it would have got wrong
    (a subject without a range has no worst value: answered only, and the page says so)."""
    unanswered = failed + missing
    strict: Dist | None = None
    if info.worst is not None:
        strict = dist.copy()
        if unanswered:
            strict.add(info.worst, unanswered)
    chosen = strict if scoring == "strict" and strict is not None else dist
    total = dist.n + unanswered
    return Cell(
        mean=chosen.mean,
        ci=dist_ci(chosen, info) if with_ci else None,
        n=chosen.n,
        failed=failed,
        missing=missing,
        overridden=overridden,
        answered_mean=dist.mean,
        strict_mean=strict.mean if strict is not None else None,
        coverage=dist.n / total if total else None,
        answered=dist.n,
    )


def dist_ci(dist: Dist, info: SubjectInfo) -> Interval | None:
    """The cell's interval: seeded, so the same values always give the same one, and kept
    (a board shows 20 models × 5 subjects × 2 modes, ~5 ms each, mostly unchanged)."""
    if dist.hist is None:
        return dist.ci(info.low, info.high) if info.has_range else dist.ci()
    ends = (info.low, info.high) if info.has_range else (None, None)
    key = (tuple(sorted(dist.hist.items())), *ends)
    found = _cell_cis.get_or_compute(key, lambda: dist.ci(*ends) or NO_CI)
    return None if found is NO_CI else found


_cell_cis: Memo[Interval] = Memo("cell intervals", size=4096)
NO_CI = Interval(math.nan, math.nan, "exact")  # stands for None in the memo


@dataclass
class Row:
    run: Run
    label: str
    cells: dict[str, dict[str, Cell]]  # mode -> subject -> cell
    overall: dict[str, float | None]  # mode -> weighted score
    overall_ci: dict[str, Interval | None] = field(default_factory=dict)  # mode -> its 95% CI

    def value(self, key: str, mode: str) -> float | str | None:
        if key == "model":
            return self.label.lower()
        if key == "overall":
            return self.overall[mode]
        stat, _, subject = key.partition(":")
        if stat == "judge":
            return self.cells["judge"][subject].mean
        cell = self.cells[mode][subject]
        return getattr(cell, stat)


@dataclass
class Params:
    judge_id: int | None = None
    judge_name: str | None = None
    judge_version: int | None = None
    dataset_id: int | None = None
    values: str = "both"
    sort: str = "overall"
    direction: str | None = None  # "asc" | "desc"; None: the column's natural direction
    weights: dict[str, float] = field(default_factory=dict)
    tag: str | None = None
    tag_subject: str | None = None
    scoring: str = "strict"
    common: bool = False  # only the items every model on the board has (see common_items)
    cluster: str | None = None  # a tag prefix: CIs clustered on the items' tag with it
    epochs: Reduction = field(default_factory=Reduction)  # how an item's epochs make its value

    @property
    def mode(self) -> str:
        """The mode whose numbers lead: human-corrected unless judge-only is asked for."""
        return "judge" if self.values == "judge" else "human"

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> "Params":
        def integer(name: str) -> int | None:
            value = (query.get(name) or "").strip()
            return int(value) if value.isdigit() else None

        weights = {}
        for key, value in query.items():
            if key.startswith("w."):
                number = as_number(value)
                if number is not None and number >= 0:
                    weights[key[2:]] = number
        values = query.get("values") or "both"
        scoring = query.get("scoring") or "strict"
        direction = query.get("dir")
        return cls(
            judge_id=integer("judge"),
            dataset_id=integer("dataset"),
            values=values if values in VALUE_VIEWS else "both",
            sort=query.get("sort") or "overall",
            direction=direction if direction in ("asc", "desc") else None,
            weights=weights,
            tag=(query.get("tag") or "").strip() or None,
            tag_subject=query.get("tag_subject") or None,
            scoring=scoring if scoring in SCORINGS else "strict",
            common=query.get("common") == "1",
            cluster=(query.get("cluster") or "").strip() or None,
            epochs=Reduction.parse(query.get("epochs")),
        )


@dataclass
class Board:
    task: Task
    params: Params
    judges: list[Judge]
    judge: Judge | None
    datasets: list[Dataset] = field(default_factory=list)
    subjects: list[SubjectInfo] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)
    normalised: bool = True
    tags: list[str] = field(default_factory=list)
    tag_subject: SubjectInfo | None = None
    tag_rows: list[dict[str, Any]] = field(default_factory=list)
    sort: str = "overall"
    direction: str = "desc"
    # run id → 1 + models significantly better (set by pairs.build; empty until then)
    tied_ranks: dict[int, int] = field(default_factory=dict)
    # Models that cover different items (dataset versions, or failures when answered only):
    # (label, items in play) per model, and how many all of them have. None: all the same.
    coverage: "Coverage | None" = None
    clusters: int | None = None  # with Params.cluster: how many clusters the CIs were built on
    # Epochs (repeated generations): the most and the fewest any model on the board has, and
    # the reduction in force (Params.epochs, with pass@k's k capped at the most any model
    # has). Each model's pass@k comes from its own epochs (#29.10): a model with fewer than k
    # has its own pass@n (n its epochs) and is listed in `short_epochs`, never silently.
    epochs: int = 1
    fewest_epochs: int = 1
    reduction: Reduction = field(default_factory=Reduction)
    short_epochs: dict[int, Reduction] = field(default_factory=dict)  # run id → its reduction
    flaky: dict[int, int] = field(default_factory=dict)  # run id → items whose epochs disagree
    # run id → items the task's rule sends to people that nobody reviewed yet (#14.4)
    doubtful: dict[int, int] = field(default_factory=dict)
    # run id → the corpus-level metric (corpus BLEU, macro-F1) of a metric judge that has one
    corpus: dict[int, CorpusCell] = field(default_factory=dict)
    # Models answering memory scripts: the subject's mean per scripted information gap, with
    # each model's realised gap (apps/leaderboards/gaps.py); empty for other boards.
    gap_rows: list[gaps.GapRow] = field(default_factory=list)
    # A judge that scores per turn: turn 1, turn 2… and overall per model (apps.leaderboards.turns)
    turn_table: "turns.TurnTable | None" = None
    # Judge-corrected scores (PPI++ from the review policy's random sample; set by
    # apps.leaderboards.corrected.build, None without a sample)
    corrected: "Corrected | None" = None
    # run id → what the model cost: generation and judge, savings, per item, latency (#32.4)
    costs: dict[int, ModelCost] = field(default_factory=dict)
    # run id → its summary's human-corrected state (summaries.RunScores.state): keys what is
    # computed from a run's human values, so a change to one run recomputes that run only.
    states: dict[int, str] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return self.params.mode

    @property
    def corpus_metric(self) -> CorpusCell | None:
        """The corpus metric's name and label, as the first model's cell has them."""
        return next(iter(self.corpus.values()), None)

    @property
    def has_copies(self) -> bool:
        """Some dataset on the board is a perturbed copy ("all" leaves those out)."""
        return any(dataset.perturbation for dataset in self.datasets)

    @functools.cached_property
    def last_event(self) -> int:
        """The last review event, read once per board: it keys the cached human values."""
        return review_state()

    def reduction_for(self, run: Run) -> Reduction:
        """The reduction of one model's epochs: the board's, or pass@n for a model with only
        n < k epochs (marked on the board: `short_epochs`)."""
        return self.short_epochs.get(run.pk, self.reduction)

    @property
    def short_epochs_text(self) -> str:
        """Which models have fewer epochs than the board's pass@k needs, and what they show."""
        if not self.short_epochs:
            return ""
        named = "; ".join(
            f"{row.label} has {row.run.judged_epochs} epoch{'s' if row.run.judged_epochs != 1 else ''}"
            f" and shows {self.short_epochs[row.run.pk].label}"
            for row in self.rows
            if row.run.pk in self.short_epochs
        )
        return (
            f"{self.reduction.label} needs {self.reduction.k} epochs of an item: {named} "
            f"(the most it can have, a lower bound of its {self.reduction.label}; marked †)."
        )

    @property
    def modes_shown(self) -> list[str]:
        return ["judge", "human"] if self.params.values == "both" else [self.params.values]

    def subject(self, name: str) -> SubjectInfo | None:
        return next((s for s in self.subjects if s.name == name), None)

    @property
    def overall_formula(self) -> str:
        """How `combine` forms the overall score, in words, with this board's ranges,
        directions and weights: the page, the CSV and the CLI say it beside the number, since
        a 0–100 overall next to 1–5 subject means is otherwise a puzzle."""
        if self.normalised:
            rule = (
                "weighted mean of the subjects' means, each rescaled to 0–100 by its range: "
                "(mean − min) / (max − min) × 100, or 100 minus that where lower is better"
            )
        else:
            rule = (
                "weighted mean of the subjects' raw means, not rescaled (not every subject "
                "declares a range); a lower-is-better mean counts negatively"
            )
        terms = []
        for info in self.subjects:
            weight = self.weights.get(info.name, 1.0)
            left_out = " (left out)" if weight == 0 else ""
            terms.append(
                f"{info.name} {info.range_text}, {info.direction}, weight {weight:g}{left_out}"
            )
        scoring = (
            "Failed and missing items count at each subject's worst value (strict)"
            if self.params.scoring == "strict"
            else "Failed and missing items are left out of the means (answered only)"
        )
        epochs = (
            f" Each item's value is the {self.reduction.label} of its epochs."
            if self.epochs > 1 or not self.reduction.is_mean
            else ""
        )
        return f"Overall = {rule}. {scoring}.{epochs} " + "; ".join(terms) + "."

    def natural_direction(self, key: str) -> str:
        stat, _, name = key.partition(":")
        if key == "model":
            return "asc"
        if key == "overall":
            return "desc"
        if stat in ("mean", "judge"):
            info = self.subject(name)
            return "desc" if info is None or info.higher_is_better else "asc"
        return "asc" if stat in ("failed", "missing") else "desc"

    def valid_sort(self, key: str) -> bool:
        if key in ("overall", "model"):
            return True
        stat, _, name = key.partition(":")
        return stat in STATS and self.subject(name) is not None


def build(task: Task, params: Params) -> Board:
    judges = judges_with_runs(task)
    judging = TaskJudging.of(task.pk)  # the default judge and the rule for "needs a person"
    judge = pick_judge(
        judges, params.judge_id, params.judge_name, params.judge_version, judging.default_judge_id
    )
    board = Board(task=task, params=params, judges=judges, judge=judge)
    if judge is None:
        return board
    board.subjects = subject_infos(judge)
    all_runs = board_runs(task, judge)
    board.datasets = sorted({run.dataset for run in all_runs}, key=lambda d: (d.name, d.version))
    if params.dataset_id is None:
        # Perturbed copies rank on their own (chosen as the dataset) and on the robustness
        # page: among "all" they would list each model again beside itself.
        runs = [r for r in all_runs if not r.dataset.perturbation]
    else:
        runs = [r for r in all_runs if r.dataset_id == params.dataset_id]
    scores = summaries.load(runs)
    board.states = {run_id: found.state for run_id, found in scores.items()}
    board.tags = summaries.tags_of(scores.values())
    tag = params.tag if params.tag in board.tags else None
    board.weights = {s.name: params.weights.get(s.name, 1.0) for s in board.subjects}
    board.normalised = all(s.has_range for s in board.subjects)
    settings = (tuple(board.subjects), tag, params.scoring, tuple(sorted(board.weights.items())))
    keys = {
        run.pk: (run.pk, summaries.fingerprint(run), scores[run.pk].state, *settings)
        for run in runs
    }
    kept = _row_numbers.get_many(keys.values())
    fresh: dict[Hashable, RowNumbers] = {}
    for run in runs:
        numbers = kept.get(keys[run.pk])
        if numbers is None:
            numbers = fresh[keys[run.pk]] = row_numbers(board, scores[run.pk], tag)
        cells, overall, overall_ci = numbers
        board.rows.append(
            Row(
                run=run,
                label=model_label(run),
                cells={mode: dict(by_subject) for mode, by_subject in cells.items()},
                overall=dict(overall),
                overall_ci=dict(overall_ci),
            )
        )
    _row_numbers.put_many(fresh)
    board.costs = costs.model_costs(board.rows)
    board.epochs = max((row.run.judged_epochs for row in board.rows), default=1)
    board.fewest_epochs = min((row.run.judged_epochs for row in board.rows), default=1)
    board.reduction = params.epochs.capped(board.epochs)
    board.short_epochs = {
        row.run.pk: board.reduction.capped(row.run.judged_epochs)
        for row in board.rows
        if board.reduction.capped(row.run.judged_epochs) != board.reduction
    }
    if board.epochs > 1:
        board.flaky = {
            row.run.pk: found
            if (found := scores[row.run.pk].flaky) is not None
            else flaky_count(row.run)
            for row in board.rows
        }
    if judging.doubts:
        board.doubtful = {
            row.run.pk: doubtful_count(row.run, board.last_event) for row in board.rows
        }
    if not board.reduction.is_mean:
        epoch_cells(board, tag)
    if corpus.has_corpus_metric(judge):
        subject = board.subjects[0].name
        board.corpus = {
            row.run.pk: dataclasses.replace(
                corpus.corpus_cell(row.run, judge, tag, params.scoring),
                item_mean=row.cells["judge"][subject].mean,
            )
            for row in board.rows
        }
    board.coverage = item_coverage(board)
    if params.common and board.coverage is not None:
        common_items(board, tag)
    if params.cluster:
        cluster_cis(board, params.cluster, tag)
    sort_rows(board)
    if judge.per_turn and board.subjects:
        info = board.subject(params.tag_subject or "") or board.subjects[0]
        board.turn_table = turns.turn_table(
            [
                (row.label, row.run.pk, row.run.dataset_id, row.cells[board.mode][info.name].mean)
                for row in board.rows
            ],
            info,
            params.scoring,
            tag,
        )
    if board.coverage is not None:  # listed in the board's order
        by_run = board.coverage.by_run
        board.coverage = Coverage(
            [(row.label, by_run[row.run.pk]) for row in board.rows], board.coverage.common, by_run
        )
    if params.common and board.coverage is not None:
        array_tag_table(board, common=True)
    elif not board.reduction.is_mean:
        array_tag_table(board, common=False)
    else:
        tag_table(board, scores)
    if board.subjects:
        by = board.tag_subject or board.subjects[0]
        board.gap_rows = gaps.gap_rows(board.rows, by.name, board.mode == "human")
    return board


RowNumbers = tuple[dict[str, dict[str, Cell]], dict[str, float | None], dict[str, Interval | None]]


def row_numbers(board: Board, run_scores: summaries.RunScores, tag: str | None) -> RowNumbers:
    """One model's cells per mode and subject, its overall and the overall's interval, from
    its summary, scored the board's way."""
    cells: dict[str, dict[str, Cell]] = {mode: {} for mode in MODES}
    for info in board.subjects:
        group, items = summaries.merged(run_scores, info.name, tag)
        scored = group.judge.n + group.judge_failed
        for mode in MODES:
            dist = group.human if mode == "human" else group.judge
            failed = group.human_failed if mode == "human" else group.judge_failed
            cells[mode][info.name] = score_cell(
                dist,
                failed,
                max(items - scored, 0),
                group.overridden,
                info,
                board.params.scoring,
            )
    overall = {mode: weighted(cells[mode], board.subjects, board.weights) for mode in MODES}
    overall_ci = {
        mode: overall_interval(board, run_scores, mode, cells[mode], tag)
        if overall[mode] is not None
        else None
        for mode in MODES
    }
    return cells, overall, overall_ci


def _interval_json(ci: Interval | None) -> list | None:
    return None if ci is None else [ci.low, ci.high, ci.method]


def _interval(data: list | None) -> Interval | None:
    return None if data is None else Interval(*data)


def _cell_json(cell: Cell) -> dict[str, Any]:
    return {**dataclasses.asdict(cell), "ci": _interval_json(cell.ci)}


def _cell(data: dict[str, Any]) -> Cell:
    return Cell(**{**data, "ci": _interval(data["ci"])})


def _encode_row(numbers: RowNumbers) -> list:
    cells, overall, overall_ci = numbers
    return [
        {mode: {name: _cell_json(c) for name, c in by.items()} for mode, by in cells.items()},
        overall,
        {mode: _interval_json(ci) for mode, ci in overall_ci.items()},
    ]


def _decode_row(data: list) -> RowNumbers:
    cells, overall, overall_ci = data
    return (
        {mode: {name: _cell(c) for name, c in by.items()} for mode, by in cells.items()},
        overall,
        {mode: _interval(ci) for mode, ci in overall_ci.items()},
    )


# A model's row per state of its results and human values and the board's settings: the
# first request of a restarted process reads 20 rows' numbers in one query instead of
# computing ~200 intervals (apps.leaderboards.memo.Stored).
_row_numbers: memo.Stored[RowNumbers] = memo.Stored("board rows", _encode_row, _decode_row)


def values_of(board: Board, run: Run, mode: str) -> dict[str, np.ndarray]:
    """The run's per-item values as this board counts them (its mode's values, its epochs'
    reduction): what pairs, common items, clusters and reduced cells are computed from."""
    reduction = board.reduction_for(run)
    if mode == "human" and (state := board.states.get(run.pk)):
        return items.item_values(run, mode, reduction=reduction, state=state)
    return items.item_values(run, mode, board.last_event, reduction)


def _reduced_key(board: Board, run: Run, mode: str) -> tuple:
    """What a reduced computation of one run depends on (the run's results, for human values
    its summary's human-corrected state, which moves only with this run's changes, and the
    board's settings): an override recomputes its own model only."""
    human = board.states.get(run.pk) or board.last_event
    return (
        run.pk,
        summaries.fingerprint(run),
        mode,
        human if mode == "human" else 0,
        board.reduction_for(run),
        board.params.scoring,
    )


def epoch_cells(board: Board, tag: str | None) -> None:
    """Every model's cells, overall and overall CI again with each item's value the board's
    reduction of its epochs (majority vote, pass@k) instead of their mean. Failed and
    missing items count as the scoring says, as in the mean's cells. Kept per state of the
    results, the human values and the settings, in the database too: a restarted process
    reads them in one query instead of reducing 100k items per model (#33.2)."""
    weights = tuple(sorted(board.weights.items()))
    keys = {
        (mode, row.run.pk): (
            *_reduced_key(board, row.run, mode),
            tuple(board.subjects),
            tag,
            weights,
        )
        for mode in MODES
        for row in board.rows
    }
    kept = _epoch_cells.get_many(keys.values())
    fresh: dict[Hashable, ReducedNumbers] = {}
    for mode in MODES:
        for row in board.rows:
            key = keys[mode, row.run.pk]
            numbers = kept.get(key)
            if numbers is None:
                numbers = fresh[key] = reduced_numbers(board, row, mode, tag)
            cells, overall, overall_ci = numbers
            row.cells[mode], row.overall[mode], row.overall_ci[mode] = (
                dict(cells),
                overall,
                overall_ci,
            )
    _epoch_cells.put_many(fresh)


ReducedNumbers = tuple[dict[str, Cell], float | None, Interval | None]


def reduced_numbers(board: Board, row: Row, mode: str, tag: str | None) -> ReducedNumbers:
    """One model's cells, overall and overall CI in one mode from its reduced item values."""
    found = items.dataset_items(row.run.dataset)
    mask = found.tagged(tag)
    values = values_of(board, row.run, mode)
    own = {
        s.name: values.get(s.name, np.full(len(found.keys), np.nan))[mask] for s in board.subjects
    }
    cells = {}
    for info in board.subjects:
        before = row.cells[mode][info.name]
        cells[info.name] = _array_cell(
            own[info.name], info, board.params.scoring, before.overridden, missing=before.missing
        )
    overall = weighted(cells, board.subjects, board.weights)
    everything = np.ones(int(mask.sum()), dtype=bool)
    overall_ci = _per_item_overall_ci(board, own, everything) if overall is not None else None
    return cells, overall, overall_ci


_epoch_cells: memo.Stored[ReducedNumbers] = memo.Stored(
    "reduced cells",
    lambda numbers: [
        {name: _cell_json(cell) for name, cell in numbers[0].items()},
        numbers[1],
        _interval_json(numbers[2]),
    ],
    lambda data: ({name: _cell(c) for name, c in data[0].items()}, data[1], _interval(data[2])),
    size=256,
)


# ---- the same items ---------------------------------------------------------------------
@dataclass(frozen=True)
class Coverage:
    counts: list[tuple[str, int]]  # model → items in play
    common: int  # items every model has
    by_run: dict[int, int] = field(default_factory=dict, compare=False)


def active_subjects(board: Board) -> list[SubjectInfo]:
    """The subjects the overall is made of: those with a weight."""
    return [s for s in board.subjects if board.weights.get(s.name, 1.0) != 0]


def as_scored(board: Board, info: SubjectInfo, values: np.ndarray) -> np.ndarray:
    """Per-item values as the board's scoring counts them: strict puts an item without a value
    (NaN) at the subject's worst value where it has one; answered leaves it NaN, left out."""
    if board.params.scoring == "strict" and info.worst is not None:
        return np.where(np.isnan(values), info.worst, values)
    return values


def per_item_overall(board: Board, columns: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Each item's overall (`combine`) from its weighted subjects' values, already as scored;
    NaN where one is missing, None when no subject is weighted."""
    active = {s.name: columns[s.name] for s in active_subjects(board)}
    combined = combine(active, board.subjects, board.weights) if active else None
    return None if combined is None else np.asarray(combined, dtype=float)


def _aligned(board: Board, mode: str) -> list[dict[str, np.ndarray]]:
    """Per row, subject → values on the items every row's dataset has, lined up by item."""
    positions = items.common_positions([row.run.dataset for row in board.rows])
    out = []
    for row, at in zip(board.rows, positions, strict=True):
        values = values_of(board, row.run, mode)
        out.append(
            {s.name: values.get(s.name, np.full(len(at), np.nan))[at] for s in board.subjects}
        )
    return out


def _in_play(board: Board, values: dict[str, np.ndarray], subjects: list[SubjectInfo]) -> Any:
    """Items that count for a model: all of them when strict, else those with every value."""
    size = len(next(iter(values.values()))) if values else 0
    mask = np.ones(size, dtype=bool)
    if board.params.scoring == "answered":
        for info in subjects:
            mask &= ~np.isnan(values[info.name])
    return mask


def item_coverage(board: Board) -> Coverage | None:
    """Whether the models cover different items; None when they all have the same ones."""
    if len(board.rows) < 2 or not board.subjects:
        return None
    active = active_subjects(board) or board.subjects
    counts, masks = [], []
    strict = board.params.scoring == "strict"
    for row in board.rows:
        own = items.dataset_items(row.run.dataset)
        if strict:
            counts.append((row.label, len(own.keys)))
        else:
            values = values_of(board, row.run, board.mode)
            own_values = {
                s.name: values.get(s.name, np.full(len(own.keys), np.nan)) for s in active
            }
            counts.append((row.label, int(_in_play(board, own_values, active).sum())))
    if strict:  # every item of a dataset counts: the shared keys are what is in common
        common = len(items.common_positions([row.run.dataset for row in board.rows])[0])
    else:
        for values in _aligned(board, board.mode):
            masks.append(_in_play(board, values, active))
        common = int(np.logical_and.reduce(masks).sum()) if masks else 0
    if all(count == common for _, count in counts):
        return None
    by_run = {row.run.pk: count for row, (_, count) in zip(board.rows, counts, strict=True)}
    return Coverage(counts, common, by_run)


def _array_cell(
    values: np.ndarray,
    info: SubjectInfo,
    scoring: str,
    overridden: int,
    with_ci: bool = True,
    missing: int = 0,
) -> Cell:
    """A cell from per-item values (NaN: no value); `missing` of the NaNs are items never
    judged, the others failed."""
    answered = values[~np.isnan(values)]
    unanswered = len(values) - len(answered)
    missing = min(missing, unanswered)
    return score_cell(
        Dist.of_array(answered),
        unanswered - missing,
        missing,
        overridden,
        info,
        scoring,
        with_ci,
    )


def common_items(board: Board, tag: str | None) -> None:
    """Every model's cells, overall and overall CI again, on the items all of them have (and
    carry `tag`): per subject the items every model answered when answered only; every item
    of every model's dataset when strict (failed and missing ones at the worst value, counted
    as failed)."""
    tags = items.dataset_items(board.rows[0].run.dataset).tags[
        items.common_positions([row.run.dataset for row in board.rows])[0]
    ]
    tagged = items.tag_mask(tags, tag)
    for mode in MODES:
        aligned = _aligned(board, mode)
        for info in board.subjects:
            mask = tagged & np.logical_and.reduce(
                [_in_play(board, values, [info]) for values in aligned]
            )
            for row, values in zip(board.rows, aligned, strict=True):
                overridden = row.cells[mode][info.name].overridden
                row.cells[mode][info.name] = _array_cell(
                    values[info.name][mask], info, board.params.scoring, overridden
                )
        active = active_subjects(board)
        mask = tagged & np.logical_and.reduce(
            [_in_play(board, values, active) for values in aligned]
        )
        for row, values in zip(board.rows, aligned, strict=True):
            row.overall[mode] = weighted(row.cells[mode], board.subjects, board.weights)
            row.overall_ci[mode] = _per_item_overall_ci(board, values, mask)


def _per_item_overall_ci(
    board: Board, values: dict[str, np.ndarray], mask: np.ndarray
) -> Interval | None:
    columns = {s.name: as_scored(board, s, values[s.name][mask]) for s in board.subjects}
    per_item = per_item_overall(board, columns)
    if per_item is None:
        return None
    per_item = per_item[~np.isnan(per_item)]
    if not per_item.size:
        return None
    return mean_ci(per_item, 0.0, 100.0) if board.normalised else mean_ci(per_item)


def cluster_of(tags_text: str, key: str, prefix: str) -> str:
    """The item's cluster: its first tag starting with `prefix`, else the item on its own."""
    for tag in (tags_text or "").strip("|").split("|"):
        if tag.startswith(prefix):
            return tag
    return f"\x00item:{key}"


def cluster_cis(board: Board, prefix: str, tag: str | None) -> None:
    """Every cell's and overall's CI again, cluster-robust on the items' `prefix` tag (items
    of one passage, say, are not independent: naive intervals are too narrow). On the same
    items as the cells: common ones if asked, in play for the scoring, carrying `tag`."""
    common = board.params.common and board.coverage is not None
    datasets = [row.run.dataset for row in board.rows]
    positions = items.common_positions(datasets) if common else None
    strict = board.params.scoring == "strict"
    seen: set[str] = set()
    for mode in MODES:
        aligned = _aligned(board, mode) if common else None
        for index, row in enumerate(board.rows):
            found = items.dataset_items(row.run.dataset)
            at = positions[index] if positions is not None else np.arange(len(found.keys))
            clusters = np.array(
                [
                    cluster_of(t, k, prefix)
                    for t, k in zip(found.tags[at], found.keys[at], strict=True)
                ],
                dtype=object,
            )
            seen.update(c for c in clusters.tolist() if not c.startswith("\x00"))
            tagged = items.tag_mask(found.tags[at], tag)
            own = values_of(board, row.run, mode)
            columns = {}
            for info in board.subjects:
                values = (
                    aligned[index][info.name]
                    if aligned is not None
                    else own.get(info.name, np.full(len(found.keys), np.nan))[at]
                )
                mask = tagged.copy()
                if aligned is not None and not strict:
                    for other in aligned:
                        mask &= ~np.isnan(other[info.name])
                values = as_scored(board, info, values)
                mask &= ~np.isnan(values)
                columns[info.name] = np.where(mask, values, np.nan)
                cell = row.cells[mode][info.name]
                row.cells[mode][info.name] = dataclasses.replace(
                    cell, ci=clustered_ci(values[mask], clusters[mask])
                )
            per_item = per_item_overall(board, columns)
            if per_item is not None:
                keep = ~np.isnan(per_item)
                row.overall_ci[mode] = clustered_ci(per_item[keep], clusters[keep])
    board.clusters = len(seen)


def array_tag_table(board: Board, common: bool) -> None:
    """The per-tag table from per-item values, like `tag_table`: on the items every model has
    when `common`, else on each model's own items (epochs reduced the board's way)."""
    if not board.tags or not board.subjects:
        return
    info = board.subject(board.params.tag_subject or "") or board.subjects[0]
    board.tag_subject = info
    with_ci = len(board.tags) * len(board.rows) <= TAG_CI_LIMIT
    columns: list[list[dict[str, Any]]] = []  # per row: its cell per tag
    if common:
        positions = items.common_positions([row.run.dataset for row in board.rows])
        tags = items.dataset_items(board.rows[0].run.dataset).tags[positions[0]]
        aligned = _aligned(board, board.mode)
        in_play = np.logical_and.reduce([_in_play(board, values, [info]) for values in aligned])
        masks = [items.tag_mask(tags[in_play], tag) for tag in board.tags]
        columns = [
            _tag_cells(board, info, values[info.name][in_play], masks, with_ci)
            for values in aligned
        ]
    else:
        # Kept per model and state (in the database too): a change to one model's values
        # recomputes its column only, and a restarted process reads them in one query.
        keys = {
            row.run.pk: (
                *_reduced_key(board, row.run, board.mode),
                info,
                tuple(board.tags),
                with_ci,
            )
            for row in board.rows
        }
        kept = _epoch_tags.get_many(keys.values())
        fresh: dict[Hashable, list[dict[str, Any]]] = {}
        for row in board.rows:
            if (found := kept.get(keys[row.run.pk])) is None:
                dataset = items.dataset_items(row.run.dataset)
                own = values_of(board, row.run, board.mode).get(
                    info.name, np.full(len(dataset.keys), np.nan)
                )
                in_play = _in_play(board, {info.name: own}, [info])
                masks = [dataset.tagged(tag)[in_play] for tag in board.tags]
                found = fresh[keys[row.run.pk]] = _tag_cells(
                    board, info, own[in_play], masks, with_ci
                )
            columns.append(found)
        _epoch_tags.put_many(fresh)
    for at, tag in enumerate(board.tags):
        board.tag_rows.append({"tag": tag, "cells": [column[at] for column in columns]})


def _tag_cells(
    board: Board, info: SubjectInfo, values: np.ndarray, masks: list[np.ndarray], with_ci: bool
) -> list[dict[str, Any]]:
    """One model's cell per tag (its items in play carrying the tag: `masks`)."""
    cells = []
    for mask in masks:
        cell = _array_cell(values[mask], info, board.params.scoring, 0, with_ci)
        cells.append(
            {
                "mean": cell.mean,
                "ci": cell.ci,
                "n": cell.n,
                "answered": cell.answered,
                "failed": cell.failed,
                "items": int(mask.sum()),
            }
        )
    return cells


def weighted(
    cells: dict[str, Cell], subjects: list[SubjectInfo], weights: dict[str, float]
) -> float | None:
    """Weighted mean of the subjects' means (see `combine`). None if a weighted subject has no
    mean: never a partial score."""
    means = {s.name: cells[s.name].mean for s in subjects if weights.get(s.name, 1.0) != 0}
    if any(mean is None for mean in means.values()):
        return None
    return combine(means, subjects, weights)


def combine(
    means: Mapping[str, Any], subjects: list[SubjectInfo], weights: dict[str, float]
) -> Any:
    """Weighted mean of the subjects' means, each first put on 0–1 by its declared range (and
    flipped where lower is better), then scaled to 0–100. Without ranges on every subject the
    raw means are combined. Plain arithmetic, so the means may be numbers or numpy arrays of
    bootstrap resamples alike. None if every weight is 0."""
    normalise = all(s.has_range for s in subjects)
    total: Any = 0.0
    weight_sum = 0.0
    for info in subjects:
        weight = weights.get(info.name, 1.0)
        if weight == 0:
            continue
        mean = means[info.name]
        value = (mean - info.low) / (info.high - info.low) if normalise else mean  # type: ignore[operator]
        if not info.higher_is_better:
            value = 1 - value if normalise else -value
        total = total + weight * value
        weight_sum += weight
    if weight_sum == 0:
        return None
    return total / weight_sum * (100 if normalise else 1)


def overall_interval(
    board: Board,
    run_scores: summaries.RunScores,
    mode: str,
    cells: dict[str, Cell],
    tag: str | None,
) -> Interval | None:
    """95% CI of the overall score. Subjects are scored on the same items, so items are
    resampled with all their subjects together (per-item vectors from the summary), and each
    resample goes through `combine`. With one weighted subject it is that subject's CI,
    rescaled. None where the summary has no vectors for it: a run still going, or a tag set
    with too many distinct vectors."""
    active = [s for s in board.subjects if board.weights.get(s.name, 1.0) != 0]
    if len(active) == 1:
        ci = cells[active[0].name].ci
        if ci is None:
            return None
        ends = sorted(
            combine({active[0].name: end}, board.subjects, board.weights)
            for end in (ci.low, ci.high)
        )
        return Interval(ends[0], ends[1], ci.method)
    counts = summaries.vectors_of(run_scores, mode, tag)
    if not counts or any(s.name not in run_scores.vector_subjects for s in active):
        return None
    if board.params.scoring == "strict":
        counts = strict_vectors(counts, run_scores, board, tag)
    # Sorted, so the seeded draw (and the cache below) does not depend on the order in which
    # the vectors were counted.
    ordered = sorted(
        counts.items(), key=lambda entry: [-math.inf if v is None else v for v in entry[0]]
    )
    return resampled_overall(
        tuple(vector for vector, _ in ordered),
        tuple(n for _, n in ordered),
        tuple(run_scores.vector_subjects),
        tuple(board.subjects),
        tuple(sorted(board.weights.items())),
    )


def strict_vectors(
    counts: Counter[summaries.Vector],
    run_scores: summaries.RunScores,
    board: Board,
    tag: str | None,
) -> Counter[summaries.Vector]:
    """The item vectors as strict scoring sees them: a subject without a value at its worst
    value, and items with no score at all as vectors of worst values."""
    worst = [
        info.worst if (info := board.subject(name)) is not None else None
        for name in run_scores.vector_subjects
    ]
    out: Counter[summaries.Vector] = Counter()
    for vector, n in counts.items():
        out[tuple(w if v is None else v for v, w in zip(vector, worst, strict=True))] += n
    items = sum(
        count
        for tags_text, count in run_scores.item_counts.items()
        if tag is None or f"|{tag}|" in tags_text
    )
    if (unscored := items - sum(counts.values())) > 0:
        out[tuple(worst)] += unscored
    return out


@functools.lru_cache(maxsize=512)  # keys of up to 300 vectors: ~25 MB at worst
def resampled_overall(
    vectors: tuple[summaries.Vector, ...],
    counts: tuple[int, ...],
    columns: tuple[str, ...],
    subjects: tuple[SubjectInfo, ...],
    weights: tuple[tuple[str, float], ...],
) -> Interval | None:
    """The bootstrap behind `overall_interval`. Pure and seeded, so it is cached: a board
    shown again, or another sort of it, does not redo a run whose vectors did not change."""
    values = np.array([[np.nan if v is None else v for v in vector] for vector in vectors])
    chosen = dict(weights)
    active = [s for s in subjects if chosen.get(s.name, 1.0) != 0]
    used = [columns.index(s.name) for s in active]
    if all(s.has_range for s in subjects) and not np.isnan(values[:, used]).any():
        # Every item has every weighted subject (strict scoring): the overall is the mean of
        # the items' own overalls, each on 0–100, and gets the bounded interval like a cell.
        per_vector = combine(
            {s.name: values[:, columns.index(s.name)] for s in active}, list(subjects), chosen
        )
        distinct, at = np.unique(np.asarray(per_vector, dtype=float), return_inverse=True)
        counted = np.bincount(at, weights=np.array(counts, dtype=float)).astype(np.int64)
        return bounded_ci(distinct, counted, 0.0, 100.0)
    means = resampled_column_means(values, np.array(counts, dtype=np.int64))
    by_name = {name: means[:, i] for i, name in enumerate(columns)}
    return percentile_ci(combine({s.name: by_name[s.name] for s in active}, list(subjects), chosen))


memo.CLEARS.append(resampled_overall.cache_clear)


def sort_rows(board: Board) -> None:
    key = board.params.sort if board.valid_sort(board.params.sort) else "overall"
    direction = board.params.direction or board.natural_direction(key)
    board.sort, board.direction = key, direction
    present = [r for r in board.rows if r.value(key, board.mode) is not None]
    absent = [r for r in board.rows if r.value(key, board.mode) is None]
    present.sort(key=lambda r: (r.label.lower(), r.run.pk))
    present.sort(key=lambda r: r.value(key, board.mode), reverse=direction == "desc")  # type: ignore[arg-type, return-value]
    board.rows = present + absent  # rows without a value go last whichever way


def tag_table(board: Board, scores: dict[int, summaries.RunScores]) -> None:
    """Per tag, per model: the chosen subject's mean in the leading mode."""
    if not board.tags or not board.subjects:
        return
    info = board.subject(board.params.tag_subject or "") or board.subjects[0]
    board.tag_subject = info
    with_ci = len(board.tags) * len(board.rows) <= TAG_CI_LIMIT
    settings = (info, board.params.scoring, tuple(board.tags), board.mode, with_ci)
    keys = {
        row.run.pk: (
            row.run.pk,
            summaries.fingerprint(row.run),
            scores[row.run.pk].state,
            *settings,
        )
        for row in board.rows
    }
    kept = _tag_columns.get_many(keys.values())
    fresh: dict[Hashable, list[dict[str, Any]]] = {}
    columns = []
    for row in board.rows:
        column = kept.get(keys[row.run.pk])
        if column is None:
            column = fresh[keys[row.run.pk]] = tag_column(board, scores[row.run.pk], info, with_ci)
        columns.append(column)
    _tag_columns.put_many(fresh)
    for at, tag in enumerate(board.tags):
        board.tag_rows.append({"tag": tag, "cells": [dict(column[at]) for column in columns]})


def tag_column(
    board: Board, run_scores: summaries.RunScores, info: SubjectInfo, with_ci: bool
) -> list[dict[str, Any]]:
    """One model's cells of the tag table, one per tag."""
    out = []
    for tag in board.tags:
        group, items = summaries.merged(run_scores, info.name, tag)
        dist = group.human if board.mode == "human" else group.judge
        failed = group.human_failed if board.mode == "human" else group.judge_failed
        missing = max(items - group.judge.n - group.judge_failed, 0)
        cell = score_cell(
            dist, failed, missing, group.overridden, info, board.params.scoring, with_ci
        )
        out.append(
            {
                "mean": cell.mean,
                "ci": cell.ci,
                "n": cell.n,
                "answered": cell.answered,
                "failed": failed,
                "items": items,
            }
        )
    return out


_tag_columns: memo.Stored[list[dict[str, Any]]] = memo.Stored(
    "tag columns",
    lambda column: [{**cell, "ci": _interval_json(cell["ci"])} for cell in column],
    lambda data: [{**cell, "ci": _interval(cell["ci"])} for cell in data],
)
_epoch_tags: memo.Stored[list[dict[str, Any]]] = memo.Stored(
    "reduced tag columns",
    lambda column: [{**cell, "ci": _interval_json(cell["ci"])} for cell in column],
    lambda data: [{**cell, "ci": _interval(cell["ci"])} for cell in data],
    size=256,
)


# ---- chart ------------------------------------------------------------------------------
def chart(board: Board) -> dict[str, Any] | None:
    """A horizontal bar chart (with CI whiskers) of the sorted column, laid out by the page as
    a grid of three columns: the model's full name (it wraps, never cut), the bar track, and
    the value. Only positions are computed here, as percentages of the track, so names stay
    escaped text and the value, in its own column, can never sit under a whisker."""
    key = board.sort
    stat, _, name = key.partition(":")
    if key == "overall":
        info, title = None, "Overall (weighted)"
    elif stat in ("mean", "judge") and board.subject(name):
        info = board.subject(name)
        title = f"{info.label} ({'judge-only' if stat == 'judge' else board.mode})"  # type: ignore[union-attr]
    else:
        info = board.subjects[0] if board.subjects else None
        key, title = (f"mean:{info.name}", info.label) if info else ("overall", "Overall")
    mode = "judge" if key.startswith("judge:") else board.mode
    bars = []
    for row in board.rows:
        if key == "overall":
            value, ci = row.overall[mode], row.overall_ci.get(mode)
        else:
            cell = row.cells[mode][key.partition(":")[2]]
            value, ci = cell.mean, cell.ci
        bars.append((row, value, ci))
    values = [v for _, v, _ in bars if v is not None]
    if not values:
        return None
    low: float
    high: float
    if info is not None and info.has_range and info.low is not None and info.high is not None:
        low, high = info.low, info.high
    elif key == "overall" and board.normalised:
        low, high = 0.0, 100.0
    else:
        ends = values + [c.low for _, _, c in bars if c] + [c.high for _, _, c in bars if c]
        low, high = min(0.0, min(ends)), max(ends)
    span = (high - low) or 1.0

    def x(v: float) -> float:
        return round((min(max(v, low), high) - low) / span * 100, 2)

    out = []
    for row, value, ci in bars:
        whisker = None
        if ci:
            x1, x2 = x(ci.low), x(ci.high)
            # Percentages go into style attributes: written here, never localised.
            whisker = {
                "x1": x1,
                "x2": x2,
                "left": f"{x1:.2f}%",
                "width": f"{x2 - x1:.2f}%",
                "low": ci.low,
                "high": ci.high,
            }
        out.append(
            {
                "run": row.run.pk,
                "label": row.label,
                "value": value,
                "width": f"{x(value) if value is not None else 0:.2f}%",
                "ci": whisker,
            }
        )
    return {"title": title, "bars": out, "low": low, "high": high}
