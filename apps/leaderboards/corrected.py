"""The judge-corrected board (#31.1): beside judge-only and human-corrected, each model's
PPI++ mean and 95 % interval per subject (apps.leaderboards.ppi), learnt only from reviews of
the review policy's random sample (apps.review.sample), every pair of models compared by its
corrected paired difference with Holm-adjusted p-values and tied ranks, the effective number of
human labels each estimate is worth, and a note when the correction reorders the models.

Why only the random sample: the correction is unbiased because the items people labelled were
drawn by chance. Reviews of items served for being doubtful, failed or flaky (chosen by the
judge's own values) would bias it, so they stay out: such an item counts with its judge value
like any unlabelled one. An item of the sample that nobody has reviewed yet is unlabelled too;
the queue serves the sample in random order, so a half-reviewed sample is a random half.

With the policy's active design (#31.2) the items were drawn with recorded probabilities π_i,
larger where the judge is less sure, and each review counts with weight 1/π_i
(apps.leaderboards.active), which keeps the estimate unbiased. The queue serves that sample in
the order of draw / π_i; the labelled items are those before the first sampled item in play
not yet reviewed (at ratio c), which are an active sample with probabilities min(1, c·π_i).

Items are scored the board's way (strict or answered, its tag, its epochs' reduction); the
ranking key is the board's (overall or the subject it is sorted by).
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Q

from apps.datasets.models import Dataset
from apps.judges.models import Score
from apps.leaderboards.active import active_mean, reviews_for_width
from apps.leaderboards.boards import (
    Board,
    Row,
    active_subjects,
    as_scored,
    per_item_overall,
    values_of,
)
from apps.leaderboards.items import DatasetItems, common_positions, dataset_items, tag_mask
from apps.leaderboards.memo import Memo, run_state
from apps.leaderboards.pairs import ALPHA, holm
from apps.leaderboards.ppi import Estimate, ppi_mean
from apps.review.models import ReviewPolicy
from apps.review.sample import active_sample, sample_mask
from apps.runs.models import Run

# Per item of a model: the judge's value, the people's value, whether it counts as labelled
# (in the random sample, reviewed), each scored the board's way (NaN: not in play), and the
# probability the item was labelled with under the active design (NaN: the uniform sample).
Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

_samples: Memo[np.ndarray] = Memo("random review samples")
_reviewed: Memo[dict[str, np.ndarray]] = Memo("reviewed items")


@dataclass(frozen=True)
class Entry:
    """One number of a model on the corrected board, beside the board's two others."""

    name: str  # "overall" or a subject
    estimate: Estimate | None
    judge: float | None  # judge-only, as the board shows it
    human: float | None  # human-corrected (every review, random or not), as the board shows it


@dataclass
class CorrectedRow:
    run: Run
    label: str
    cells: dict[str, Estimate | None]  # subject → PPI++ estimate (None: too few labels)
    overall: Estimate | None
    sampled: int  # items of this model's dataset in the random sample (and in play)
    judge_mean: float | None  # judge-only value of the ranking key, on the same items
    entries: list[Entry] = field(default_factory=list)  # the overall (if any), then subjects
    reviews_needed: int | None = None  # more, for the ranking key's interval to reach the target

    def value(self, key: str) -> Estimate | None:
        return self.overall if key == "overall" else self.cells.get(key)


@dataclass(frozen=True)
class CorrectedPair:
    a: CorrectedRow
    b: CorrectedRow
    estimate: Estimate | None  # the corrected mean of a − b per item
    p_adjusted: float | None = None
    better: CorrectedRow | None = None


@dataclass
class Corrected:
    policy: ReviewPolicy
    key: str  # "overall" or a subject: what ranks and what the pairs compare
    higher_is_better: bool = True
    rows: list[CorrectedRow] = field(default_factory=list)  # in the corrected order
    pairs: list[CorrectedPair] = field(default_factory=list)
    ranks: dict[int, int] = field(default_factory=dict)  # run id → corrected tied rank
    judge_order: list[CorrectedRow] = field(default_factory=list)  # by the judge-only means
    target: float | None = None  # an interval width asked for: the reviews it needs

    @property
    def sample_label(self) -> str:
        return self.policy.sample_label

    @property
    def names(self) -> list[str]:
        """The numbers each row has, in its entries' order."""
        return [entry.name for entry in self.rows[0].entries] if self.rows else []

    @property
    def labelled(self) -> int:
        """The most labelled items any model's estimate of the key has."""
        return max((e.n for row in self.rows if (e := row.value(self.key))), default=0)

    @property
    def reorders(self) -> bool:
        """The corrected means put the models in another order than the judge's means."""
        ranked = [row for row in self.rows if row.value(self.key) is not None]
        judged = [row for row in self.judge_order if row.value(self.key) is not None]
        return len(ranked) > 1 and [r.run.pk for r in ranked] != [r.run.pk for r in judged]

    @property
    def note(self) -> str:
        """What the page, the exports and the CLI say when the correction changes the ranking."""
        if not self.reorders:
            return ""
        key = "the overall" if self.key == "overall" else self.key

        def order(rows: list[CorrectedRow]) -> str:
            return " > ".join(r.label for r in rows if r.value(self.key) is not None)

        return (
            f"The correction changes the ranking on {key}: the judge alone orders "
            f"{order(self.judge_order)}; corrected by people's values on the "
            f"{'active' if self.policy.is_active else 'random'} sample, "
            f"{order(self.rows)}."
        )


# ---- inputs ---------------------------------------------------------------------------------
def sampled_items(found: DatasetItems, dataset_key: tuple, policy: ReviewPolicy) -> np.ndarray:
    percent, seed = policy.sample_percent or 0, policy.sample_seed
    return _samples.get_or_compute(
        (dataset_key, percent, seed), lambda: sample_mask(found.keys.tolist(), percent, seed)
    )


def reviewed_items(run: Run, found: DatasetItems, last_event: int) -> dict[str, np.ndarray]:
    """subject → which items a person reviewed (overrode, confirmed, settled), per state of
    the run's results and the reviews."""

    def compute() -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        rows = (
            Score.objects.filter(run_id=run.pk)
            .filter(Q(override_value__isnull=False) | Q(confirmed_at__isnull=False))
            .values_list("subject", "item_id")
        )
        for subject, item_id in rows.iterator(chunk_size=10000):
            column = out.setdefault(subject, np.zeros(len(found.keys), dtype=bool))
            if (at := found.index.get(item_id)) is not None:
                column[at] = True
        return out

    return _reviewed.get_or_compute((run.pk, run_state(run), last_event), compute)


def active_arrays(
    found: DatasetItems, dataset: Dataset, policy: ReviewPolicy
) -> tuple[np.ndarray, np.ndarray]:
    """The recorded probabilities and serving ratios (draw / probability) of the dataset's
    active sample, in the dataset's item order."""
    drawn = active_sample(policy, dataset)
    probability = np.full(len(found.keys), np.nan)
    ratio = np.full(len(found.keys), np.inf)
    for item_id, at in found.index.items():
        if item_id in drawn.probability:
            probability[at] = drawn.probability[item_id]
            ratio[at] = drawn.ratio(item_id)
    return probability, ratio


def active_labels(
    probability: np.ndarray, ratio: np.ndarray, reviewed: np.ndarray, in_play: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Labelled items and their probabilities under the active design: the items served
    before the first sampled one in play that is not reviewed yet (ratio c; 1 when all are),
    each drawn with probability min(1, c·π)."""
    waiting = (ratio < 1) & in_play & ~reviewed
    c = float(ratio[waiting].min()) if waiting.any() else 1.0
    labelled = (ratio < c) & reviewed & in_play
    return labelled, np.minimum(1.0, c * probability)


def model_columns(board: Board, row: Row, policy: ReviewPolicy) -> dict[str, Columns]:
    """subject (and "overall") → the judge's values, the people's values and the labelled
    mask of one model, on its dataset's items as the board scores them."""
    run = row.run
    found = dataset_items(run.dataset)
    size = len(found.keys)
    nothing = np.full(size, np.nan)
    judge, human = values_of(board, run, "judge"), values_of(board, run, "human")
    reviewed = reviewed_items(run, found, board.last_event)
    sampled = sampled_items(found, (run.dataset.pk, run.dataset.created_at), policy)
    tag = board.params.tag if board.params.tag in board.tags else None
    in_tag = tag_mask(found.tags, tag)
    design = active_arrays(found, run.dataset, policy) if policy.is_active else None

    def columns(yhat: np.ndarray, y: np.ndarray, reviewed_here: np.ndarray) -> Columns:
        seen = reviewed_here & ~np.isnan(y)
        if design is None:
            return yhat, y, sampled & seen & ~np.isnan(yhat), nothing
        labelled, probability = active_labels(*design, seen, ~np.isnan(yhat))
        return yhat, y, labelled, probability

    out: dict[str, Columns] = {}
    reviewed_on: dict[str, np.ndarray] = {}
    for info in board.subjects:
        yhat = np.where(in_tag, as_scored(board, info, judge.get(info.name, nothing)), np.nan)
        y = as_scored(board, info, human.get(info.name, nothing))
        reviewed_on[info.name] = reviewed.get(info.name, np.zeros(size, dtype=bool))
        out[info.name] = columns(yhat, y, reviewed_on[info.name])
    active = active_subjects(board)
    yhat_all = per_item_overall(board, {s.name: out[s.name][0] for s in active})
    y_all = per_item_overall(board, {s.name: out[s.name][1] for s in active})
    if yhat_all is not None and y_all is not None:
        every = np.logical_and.reduce([reviewed_on[s.name] for s in active])
        out["overall"] = columns(yhat_all, y_all, every)
    return out


def estimate(columns: Columns) -> Estimate | None:
    """PPI++ on the items in play (a judge value): labelled ones with the person's value;
    under the active design, each weighted by its probability (apps.leaderboards.active)."""
    yhat, y, labelled, probability = columns
    in_play = ~np.isnan(yhat)
    if not np.isnan(probability).all():
        return active_mean(y[in_play], yhat[in_play], labelled[in_play], probability[in_play])
    unlabelled = in_play & ~labelled
    return ppi_mean(y[labelled], yhat[labelled], yhat[unlabelled])


def reviews_needed(columns: Columns, found: Estimate | None, target: float) -> int | None:
    """How many more reviews bring this estimate's interval to at most `target` wide, drawing
    more items the sample's way (every item alike, or by the recorded active probabilities);
    0: it is there already; None: not even reviewing every item would do it."""
    if found is None:
        return None
    yhat, y, labelled, probability = columns
    in_play = ~np.isnan(yhat)
    if np.isnan(probability).all():  # uniform: n of N, every item alike
        probability = np.full(len(yhat), labelled[in_play].sum() / max(in_play.sum(), 1))
        shape = np.ones(int(in_play.sum()))
    else:
        shape = probability[in_play]
    needed = reviews_for_width(
        y[in_play],
        yhat[in_play],
        labelled[in_play],
        probability[in_play],
        found.lam,
        shape,
        target,
        se=found.se,
    )
    return None if needed is None else max(0, needed - found.n)


# ---- the board ------------------------------------------------------------------------------
def ranking_key(board: Board) -> str:
    key = board.sort if board.sort == "overall" else board.sort.partition(":")[2]
    if board.sort != "overall" and board.subject(key) is None:
        return "overall"
    return key


def build(board: Board, target: float | None = None) -> Corrected | None:
    """The corrected board, or None when the task's review policy draws no random sample.
    `target`: an interval width, for the reviews each model's ranking key needs to reach it."""
    if board.judge is None or not board.rows:
        return None
    policy = ReviewPolicy.of(board.task.pk)
    if not policy.has_sample:
        return None
    key = ranking_key(board)
    info = board.subject(key)
    found = Corrected(
        policy=policy,
        key=key,
        higher_is_better=info.higher_is_better if info else True,
        target=target,
    )
    columns: dict[int, dict[str, Columns]] = {}
    for row in board.rows:
        own = columns[row.run.pk] = model_columns(board, row, policy)
        at_key = own.get(key)
        items_of = dataset_items(row.run.dataset)
        sampled = (
            active_arrays(items_of, row.run.dataset, policy)[1] < 1
            if policy.is_active
            else sampled_items(items_of, (row.run.dataset.pk, row.run.dataset.created_at), policy)
        )
        in_play = ~np.isnan(at_key[0]) if at_key is not None else np.zeros(len(sampled), bool)
        cells = {s.name: estimate(own[s.name]) for s in board.subjects}
        overall = estimate(own["overall"]) if "overall" in own else None
        entries = [
            Entry(
                s.name,
                cells[s.name],
                row.cells["judge"][s.name].mean,
                row.cells["human"][s.name].mean,
            )
            for s in board.subjects
        ]
        if "overall" in own:
            entries.insert(0, Entry("overall", overall, row.overall["judge"], row.overall["human"]))
        found.rows.append(
            CorrectedRow(
                run=row.run,
                label=row.label,
                cells=cells,
                overall=overall,
                sampled=int((sampled & in_play).sum()),
                judge_mean=float(at_key[0][in_play].mean()) if in_play.any() else None,  # type: ignore[index]
                entries=entries,
                reviews_needed=(
                    reviews_needed(at_key, overall if key == "overall" else cells.get(key), target)
                    if target and at_key is not None
                    else None
                ),
            )
        )
    sign = 1 if found.higher_is_better else -1
    found.judge_order = _ordered(found.rows, lambda r: r.judge_mean, sign)
    found.rows = _ordered(
        found.rows, lambda r: e.mean if (e := r.value(key)) is not None else None, sign
    )
    _compare(found, columns)
    return found


def _ordered(
    rows: list[CorrectedRow], value: Callable[[CorrectedRow], float | None], sign: int
) -> list[CorrectedRow]:
    """Best first by `value`, rows without one last, ties by name."""
    scored = [(v, r) for r in rows if (v := value(r)) is not None]
    scored.sort(key=lambda vr: (-sign * vr[0], vr[1].label.lower(), vr[1].run.pk))
    return [r for _, r in scored] + [r for r in rows if value(r) is None]


def pair_columns(
    a: CorrectedRow, b: CorrectedRow, columns_a: Columns, columns_b: Columns
) -> Columns:
    """a − b per item on the items both have (by key across datasets): labelled where both
    are labelled, in play where both have a judge value."""
    if a.run.dataset_id != b.run.dataset_id:
        at_a, at_b = common_positions([a.run.dataset, b.run.dataset])
        columns_a = tuple(c[at_a] for c in columns_a)
        columns_b = tuple(c[at_b] for c in columns_b)
    yhat = columns_a[0] - columns_b[0]
    y = columns_a[1] - columns_b[1]
    labelled = columns_a[2] & columns_b[2] & ~np.isnan(yhat) & ~np.isnan(y)
    # Active design: each model's labelled items are those served before its ratio c, so both
    # are labelled before the smaller c: probability min(1, min(c)·π) = the smaller of the two.
    return yhat, y, labelled, np.fmin(columns_a[3], columns_b[3])


def _compare(found: Corrected, columns: dict[int, dict[str, Columns]]) -> None:
    """Every pair's corrected difference, Holm-adjusted p-values, and the tied ranks (1 + the
    models significantly better, as on the board)."""
    key = found.key
    raw = []
    for a, b in itertools.combinations(found.rows, 2):
        ca, cb = columns[a.run.pk].get(key), columns[b.run.pk].get(key)
        raw.append((a, b, estimate(pair_columns(a, b, ca, cb)) if ca and cb else None))
    tested = [i for i, (_, _, e) in enumerate(raw) if e is not None]
    adjusted = dict(zip(tested, holm([raw[i][2].p for i in tested]), strict=True))  # type: ignore[union-attr]
    better_count = {row.run.pk: 0 for row in found.rows}
    for i, (a, b, diff) in enumerate(raw):
        p_adj = adjusted.get(i)
        better = None
        if diff is not None and p_adj is not None and p_adj < ALPHA and diff.mean != 0:
            a_wins = (diff.mean > 0) == found.higher_is_better
            better, worse = (a, b) if a_wins else (b, a)
            better_count[worse.run.pk] += 1
        found.pairs.append(CorrectedPair(a, b, diff, p_adj, better))
    found.ranks = {run_id: 1 + count for run_id, count in better_count.items()}
