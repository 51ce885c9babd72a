"""Every pair of models on a board, compared on the same items, with corrected p-values.

For the board's leading number (the overall score, or the subject it is sorted by), each
model gets one value per item, scored the board's way (strict: a failed or missing item at
the worst value; answered: only items with a value). Each pair of models is compared on the
items both have: the mean difference, its paired CI and a p-value from the test
`stats.paired_p` picks (an exact sign test or a sign-flip permutation test on few items or
differences of one size, else a paired t-test: the differences of many items are near normal,
and the test is O(n) where Wilcoxon's ranks are not); each pair says which test it used. The p-values are adjusted for the number of pairs, Holm's step-down by default
(family-wise error) or Benjamini–Hochberg (false discovery rate). A model's tied rank is 1 +
the number of models significantly better than it, so "1, 1, 3" says the first two are not
told apart.
"""

import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as scipy_stats

from apps.leaderboards.boards import (
    Board,
    Row,
    active_subjects,
    as_scored,
    per_item_overall,
    values_of,
)
from apps.leaderboards.items import common_positions, dataset_items, tag_mask
from apps.leaderboards.memo import Stored
from apps.leaderboards.stats import TESTS, Interval, clipped, mean_ci, normal_ci, paired_p
from apps.leaderboards.summaries import fingerprint

ALPHA = 0.05
BOOTSTRAP_LIMIT = 5000
CORRECTIONS = {"holm": "Holm", "bh": "Benjamini–Hochberg"}


@dataclass(frozen=True)
class Pair:
    a: Row
    b: Row
    n: int  # items both models have a value for
    mean_diff: float | None  # mean of a − b, in the board's units
    ci: Interval | None
    p: float | None  # two-sided, by `test`
    test: str | None  # the test behind p: a key of stats.TESTS (None: no p)
    p_adjusted: float | None = None
    better: Row | None = None  # the significantly better of the two, after adjustment

    @property
    def test_label(self) -> str:
        return TESTS.get(self.test or "", "")


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
def board_values(board: Board, row: Row, key: str) -> np.ndarray:
    """The model's value of the board's leading number per item of its dataset, as the board
    scores it (`as_scored`); NaN for an item left out (answered only, or not tagged)."""
    found = dataset_items(row.run.dataset)
    values = values_of(board, row.run, board.mode)
    infos = (
        active_subjects(board) if key == "overall" else [s for s in board.subjects if s.name == key]
    )
    columns = {
        info.name: as_scored(board, info, values.get(info.name, np.full(len(found.keys), np.nan)))
        for info in infos
    }
    per_item = per_item_overall(board, columns) if key == "overall" else columns.get(key)
    if per_item is None:
        return np.full(len(found.keys), np.nan)
    tag = board.params.tag if board.params.tag in board.tags else None
    # The board's tag filter: other items are left out of the pairs too.
    return np.where(tag_mask(found.tags, tag), per_item, np.nan)


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
def compare_pair(
    a: Row, b: Row, values_a: np.ndarray, values_b: np.ndarray, span: float | None = None
) -> Pair:
    """a − b on the items both have a value for (paired by item key across datasets); `span`
    is the width of the values' range, which bounds the differences' interval."""
    if a.run.dataset_id != b.run.dataset_id:
        at_a, at_b = common_positions([a.run.dataset, b.run.dataset])
        values_a, values_b = values_a[at_a], values_b[at_b]
    both = ~np.isnan(values_a) & ~np.isnan(values_b)
    diff = values_a[both] - values_b[both]
    n = int(diff.size)
    if n == 0:
        return Pair(a, b, 0, None, None, None, None)
    p, test = paired_p(diff)
    mean = float(diff.mean())
    # Up to BOOTSTRAP_LIMIT items the bootstrap; beyond, the normal interval it converges to
    # (the page marks it ≈): 45 pairs of 100k items stay within the board's time budget.
    bounds = (-span, span) if span else (None, None)
    ci = (
        mean_ci(diff, *bounds)
        if n <= BOOTSTRAP_LIMIT
        else clipped(normal_ci(n, mean, float(diff.var(ddof=1))), *bounds)
    )
    return Pair(a, b, n, mean, ci, p, test)


def span_of(board: Board, key: str) -> float | None:
    """The width of the range the compared values lie in: the 0–100 overall when the board
    normalises, a subject's declared range; None without one."""
    if key == "overall":
        return 100.0 if board.normalised else None
    info = board.subject(key)
    if info is None or not info.has_range:
        return None
    return float(info.high) - float(info.low)  # type: ignore[arg-type]


def _encode_pair(numbers: tuple) -> list:
    n, mean, ci, p, test = numbers
    return [n, mean, None if ci is None else [ci.low, ci.high, ci.method], p, test]


def _decode_pair(data: list) -> tuple:
    n, mean, ci, p, test = data
    return (n, mean, None if ci is None else Interval(*ci), p, test)


# Per pair and state of both runs: kept in the database too, so a restarted process does not
# redo 190 tests over 100k items (apps.leaderboards.memo.Stored).
_compared_cache: Stored[tuple] = Stored("compared pairs", _encode_pair, _decode_pair, size=4096)


def _compared(board: Board, key: str) -> list[Pair]:
    """Every pair compared (unadjusted). Cached per pair, per state of the two runs' results
    (and human values) and the board's settings, so a warm board does not redo 190 tests over
    100k items on every request, and a change to one model's scores redoes only its pairs."""
    human = board.mode == "human"
    # Reduced (majority, pass@k) human values are keyed by the last review event; mean ones
    # by each run's own summary state.
    reduced = human and not board.reduction.is_mean
    settings = (
        board.mode,
        board.last_event if reduced else 0,
        board.params.scoring,
        board.params.tag if board.params.tag in board.tags else None,
        key,
        tuple(sorted(board.weights.items())),
        board.reduction,
    )

    def state(row: Row) -> tuple:
        return (row.run.pk, fingerprint(row.run), board.states.get(row.run.pk) if human else "")

    pairs = list(itertools.combinations(board.rows, 2))
    keys = [(state(a), state(b), settings) for a, b in pairs]
    kept = _compared_cache.get_many(keys)
    fresh: dict[Hashable, tuple] = {}
    values: dict[int, np.ndarray] = {}
    out = []
    for (a, b), pair_key in zip(pairs, keys, strict=True):
        numbers = kept.get(pair_key)
        if numbers is None:
            for row in (a, b):
                if row.run.pk not in values:
                    values[row.run.pk] = board_values(board, row, key)
            pair = compare_pair(a, b, values[a.run.pk], values[b.run.pk], span_of(board, key))
            numbers = fresh[pair_key] = (pair.n, pair.mean_diff, pair.ci, pair.p, pair.test)
        out.append(Pair(a, b, *numbers))
    _compared_cache.put_many(fresh)
    return out


def build(board: Board, correction: str = "holm") -> Pairs:
    """All pairs of the board's rows on its leading number, and the tied ranks."""
    key = board.sort if board.sort == "overall" else board.sort.partition(":")[2]
    if board.sort != "overall" and board.subject(key) is None:
        key = "overall"
    correction = correction if correction in CORRECTIONS else "holm"
    result = Pairs(key=key, correction=correction)
    raw = _compared(board, key)
    tested = {i: pair.p for i, pair in enumerate(raw) if pair.p is not None}
    adjusted = dict(zip(tested, adjust(list(tested.values()), correction), strict=True))
    info = board.subject(key)
    higher = info.higher_is_better if info is not None else True  # the overall: higher
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
            Pair(pair.a, pair.b, pair.n, pair.mean_diff, pair.ci, pair.p, pair.test, p_adj, better)
        )
    result.ranks = {run_id: 1 + count for run_id, count in better_count.items()}
    board.tied_ranks = result.ranks
    return result
