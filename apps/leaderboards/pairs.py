"""Every pair of models on a board, compared on the same items, with corrected p-values.

For the board's leading number (the overall score, or the subject it is sorted by), each
model gets one value per item, scored the board's way (strict: a failed or missing item at
the worst value; answered: only items with a value). Each pair of models is compared on the
items both have: the mean difference, its paired bootstrap CI and a paired t-test (the
differences of many items are near normal, and the test is O(n) where Wilcoxon's ranks are
not). The p-values are adjusted for the number of pairs, Holm's step-down by default
(family-wise error) or Benjamini–Hochberg (false discovery rate). A model's tied rank is 1 +
the number of models significantly better than it, so "1, 1, 3" says the first two are not
told apart.
"""

import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as scipy_stats

from apps.judges.models import Score
from apps.leaderboards.boards import Board, Row, SubjectInfo, combine
from apps.leaderboards.stats import Interval, mean_ci
from apps.leaderboards.summaries import fingerprint
from apps.review.queue import last_event_id

ALPHA = 0.05
CORRECTIONS = {"holm": "Holm", "bh": "Benjamini–Hochberg"}
_CACHE_SIZE = 64  # per process: (run, results state, mode) → item values


@dataclass(frozen=True)
class Pair:
    a: Row
    b: Row
    n: int  # items both models have a value for
    mean_diff: float | None  # mean of a − b, in the board's units
    ci: Interval | None
    p: float | None  # paired t-test, two-sided
    p_adjusted: float | None = None
    better: Row | None = None  # the significantly better of the two, after adjustment


@dataclass
class Pairs:
    key: str  # "overall" or a subject name
    correction: str
    pairs: list[Pair] = field(default_factory=list)
    ranks: dict[int, int] = field(default_factory=dict)  # run id → tied rank

    @property
    def correction_label(self) -> str:
        return CORRECTIONS[self.correction]


# ---- per-item values ------------------------------------------------------------------------
_item_cache: "OrderedDict[tuple, dict[str, dict[str, float | None]]]" = OrderedDict()


def item_values(row: Row, mode: str) -> dict[str, dict[str, float | None]]:
    """subject → item key → the value in `mode` (None: failed), for every scored item. Cached
    per process while the run's results do not change."""
    run = row.run
    # Overrides change human values without touching the run's fingerprint: the last review
    # event keys them in.
    key = (run.pk, fingerprint(run), mode, last_event_id() if mode == "human" else 0)
    if key in _item_cache:
        _item_cache.move_to_end(key)
        return _item_cache[key]
    out: dict[str, dict[str, float | None]] = {}
    rows = Score.objects.filter(run_id=run.pk).values_list(
        "subject", "item__key", "status", "judge_value", "override_value"
    )
    for subject, item_key, status, judge, override in rows.iterator(chunk_size=10000):
        value = judge if status == Score.Status.OK else None
        if mode == "human" and override is not None:
            value = override
        out.setdefault(subject, {})[item_key] = value
    _item_cache[key] = out
    while len(_item_cache) > _CACHE_SIZE:
        _item_cache.popitem(last=False)
    return out


def _dataset_keys(row: Row) -> list[str]:
    return list(row.run.dataset.items.order_by("position").values_list("key", flat=True))


def board_values(board: Board, row: Row, key: str) -> dict[str, float]:
    """Item key → the model's value of the board's leading number on that item (strict fills
    failed and missing items with the worst value; answered leaves them out)."""
    values = item_values(row, board.mode)
    strict = board.params.scoring == "strict"
    keys = _dataset_keys(row) if strict else None
    infos: list[SubjectInfo] = (
        [s for s in board.subjects if board.weights.get(s.name, 1.0) != 0]
        if key == "overall"
        else [s for s in board.subjects if s.name == key]
    )
    if not infos:
        return {}
    item_keys = (
        keys if keys is not None else sorted(set().union(*(values.get(i.name, {}) for i in infos)))
    )
    columns: dict[str, np.ndarray] = {}
    for info in infos:
        by_item = values.get(info.name, {})
        fill = info.worst if strict and info.worst is not None else math.nan
        columns[info.name] = np.array(
            [v if (v := by_item.get(k)) is not None else fill for k in item_keys], dtype=float
        )
    if key == "overall":
        combined = combine(columns, board.subjects, board.weights)
        if combined is None:
            return {}
        per_item = np.asarray(combined, dtype=float)
    else:
        per_item = columns[key]
    return {k: float(v) for k, v in zip(item_keys, per_item, strict=True) if not math.isnan(v)}


# ---- corrections ------------------------------------------------------------------------------
def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values: the i-th smallest times (m − i), made monotone."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def adjust(p_values: list[float], correction: str) -> list[float]:
    if not p_values:
        return []
    if correction == "bh":
        return [float(p) for p in scipy_stats.false_discovery_control(p_values, method="bh")]
    return holm(p_values)


# ---- the matrix ------------------------------------------------------------------------------
def compare_pair(a: Row, b: Row, values_a: dict[str, float], values_b: dict[str, float]) -> Pair:
    common = sorted(set(values_a) & set(values_b))
    n = len(common)
    if n == 0:
        return Pair(a, b, 0, None, None, None)
    diff = np.array([values_a[k] - values_b[k] for k in common], dtype=float)
    if n < 2:
        p = None
    elif not np.any(diff != diff[0]):  # every difference the same: no spread to test with
        p = 1.0 if diff[0] == 0 else 0.0
    else:
        p = float(scipy_stats.ttest_1samp(diff, 0.0).pvalue)
    return Pair(a, b, n, float(diff.mean()), mean_ci(diff), p)


def build(board: Board, correction: str = "holm") -> Pairs:
    """All pairs of the board's rows on its leading number, and the tied ranks."""
    key = board.sort if board.sort == "overall" else board.sort.partition(":")[2]
    if board.sort != "overall" and board.subject(key) is None:
        key = "overall"
    correction = correction if correction in CORRECTIONS else "holm"
    result = Pairs(key=key, correction=correction)
    values = {row.run.pk: board_values(board, row, key) for row in board.rows}
    raw = [
        compare_pair(a, b, values[a.run.pk], values[b.run.pk])
        for a, b in itertools.combinations(board.rows, 2)
    ]
    tested = [i for i, pair in enumerate(raw) if pair.p is not None]
    adjusted = dict(zip(tested, adjust([raw[i].p for i in tested], correction), strict=True))  # type: ignore[misc]
    higher = True if key == "overall" else board.subject(key).higher_is_better  # type: ignore[union-attr]
    better_count = {row.run.pk: 0 for row in board.rows}
    for i, pair in enumerate(raw):
        p_adj = adjusted.get(i)
        better = None
        if p_adj is not None and p_adj < ALPHA and pair.mean_diff:
            a_wins = (pair.mean_diff > 0) == higher
            better = pair.a if a_wins else pair.b
            worse = pair.b if a_wins else pair.a
            better_count[worse.run.pk] += 1
        result.pairs.append(
            Pair(pair.a, pair.b, pair.n, pair.mean_diff, pair.ci, pair.p, p_adj, better)
        )
    result.ranks = {run_id: 1 + count for run_id, count in better_count.items()}
    board.tied_ranks = result.ranks
    return result
