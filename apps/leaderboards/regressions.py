"""Regressions between two runs (#28.4): a baseline and a candidate judged on the same items,
every item with its two values, what changed, and a word-level diff of the two responses.

Items pair by key, as on the compare page. "Better" follows the subject's direction (higher is
better unless the judge or metric says otherwise), so a regression is a change for the worse
whatever the scale."""

import difflib
import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from apps.datasets.models import Item
from apps.judges.models import Score, ScoreEvent, judge_id_of, judge_of
from apps.leaderboards import items as item_arrays
from apps.leaderboards.compare import item_values, natural_key, review_url
from apps.leaderboards.memo import Memo, review_state, run_state
from apps.leaderboards.subjects import subject_infos
from apps.runs.models import Response, Run

IMPROVED, REGRESSED, UNCHANGED, FAILED = "improved", "regressed", "unchanged", "failed"
STATES = (REGRESSED, IMPROVED, UNCHANGED, FAILED)
LABELS = {
    REGRESSED: "regressed",
    IMPROVED: "improved",
    UNCHANGED: "unchanged",
    FAILED: "failed in one",
}


@dataclass(frozen=True)
class Change:
    key: str
    baseline_item: int | None
    candidate_item: int | None
    baseline: float | None  # None: the item failed (or has no score) in that run
    candidate: float | None
    state: str
    change: float | None  # candidate − baseline where both have a value

    @property
    def label(self) -> str:
        return LABELS[self.state]


class Changes(Sequence[Change]):
    """Changes in the page's order, built one by one as they are read (a page reads 50 of
    100k): the values, states and order are numpy arrays computed at once."""

    def __init__(self, aligned: "Aligned", order: np.ndarray, values: "Values") -> None:
        self._aligned, self._order, self._values = aligned, order, values

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> Change: ...
    @overload
    def __getitem__(self, index: slice) -> list[Change]: ...
    def __getitem__(self, index: int | slice) -> Change | list[Change]:
        if isinstance(index, slice):
            return [self._change(int(at)) for at in self._order[index]]
        return self._change(int(self._order[index]))

    def __iter__(self) -> Iterator[Change]:
        return (self._change(int(at)) for at in self._order)

    def _change(self, at: int) -> Change:
        a, v = self._aligned, self._values
        b, c, d = v.baseline[at], v.candidate[at], v.change[at]
        return Change(
            a.keys[at],
            int(a.baseline_items[at]) or None,
            int(a.candidate_items[at]) or None,
            None if np.isnan(b) else float(b),
            None if np.isnan(c) else float(c),
            STATES_BY_CODE[int(v.states[at])],
            None if np.isnan(d) else float(d),
        )


@dataclass(frozen=True)
class Compared:
    """Every change between two runs on one subject, in the page's order, with each state's."""

    found: Changes
    by_state: dict[str, Changes]

    def counts(self) -> list[tuple[str, str, int]]:
        """(state, its label, how many items) for each state, in the page's order."""
        return [(state, LABELS[state], len(self.by_state.get(state, []))) for state in STATES]


@dataclass(frozen=True)
class Aligned:
    """Both runs' judge values on one subject, item by item in the order people count keys
    (`natural_key`): index i is the same item key in every array; an item id 0 or a NaN value
    where the run has no score or the item failed."""

    keys: list[str]
    index: dict[str, int]
    baseline_items: np.ndarray  # int64
    candidate_items: np.ndarray
    baseline: np.ndarray  # float64
    candidate: np.ndarray


@dataclass(frozen=True)
class Values:
    baseline: np.ndarray
    candidate: np.ndarray
    change: np.ndarray  # candidate − baseline, NaN where either has no value
    states: np.ndarray  # codes of STATES_BY_CODE


# Pairing 100k items of two runs takes a second, paging through them should not: comparisons
# are kept, keyed by both runs' results and, for human values, the reviews; each run's judge
# values, aligned by key, are kept by their results alone, so after a review only the
# overrides are read again (see memo.py) and the rest is array arithmetic.
COMPARED: Memo[Compared] = Memo("regressions", size=16)
JUDGED: Memo[dict[str, tuple[int, float | None]]] = Memo("regressions: judge values", size=32)
ALIGNED: Memo[Aligned] = Memo("regressions: aligned judge values", size=16)
# The sort's first key: worst first, then failed in one, then improved, then unchanged.
RANK = {REGRESSED: 0, FAILED: 1, IMPROVED: 2, UNCHANGED: 3}
STATES_BY_CODE = {code: state for state, code in RANK.items()}


def judge_values(run: Run, subject: str) -> dict[str, tuple[int, float | None]]:
    """item key -> (item id, the judge's value or None when the item failed)."""
    return JUDGED.get_or_compute(
        (run.pk, run_state(run), subject),
        lambda: item_values(run, "judge", subject).get(subject, {}),
    )


def overrides(run: Run, subject: str) -> dict[str, tuple[int, float | None]]:
    """item key -> (item id, the value a review set): as the boards do, only scores with a
    value-setting event can differ from the judge."""
    overridden = Score.objects.filter(
        run_id=run.pk,
        subject=subject,
        pk__in=ScoreEvent.objects.filter(kind__in=ScoreEvent.SETS_VALUE).values("score_id"),
        override_value__isnull=False,
    ).values_list("item__key", "item_id", "override_value")
    return {key: (item_id, value) for key, item_id, value in overridden}


def values_of(run: Run, subject: str, mode: str) -> dict[str, tuple[int, float | None]]:
    """item key -> (item id, value or None when the item failed), the human value where a
    review set one (`mode` "human")."""
    judged = judge_values(run, subject)
    changed = overrides(run, subject) if mode == "human" else {}
    return judged | changed if changed else judged


def compared(baseline: Run, candidate: Run, subject: str, mode: str = "human") -> Compared:
    key = (
        (baseline.pk, run_state(baseline)),
        (candidate.pk, run_state(candidate)),
        subject,
        mode,
        review_state() if mode == "human" else None,
    )
    return COMPARED.get_or_compute(key, lambda: _compared(baseline, candidate, subject, mode))


def changes(baseline: Run, candidate: Run, subject: str, mode: str = "human") -> Changes:
    """Every item either run scored on `subject` (failed in both left out: nothing changed
    that a person can act on), most regressed first, then failed in one, then most improved,
    then unchanged; ties in item order."""
    return compared(baseline, candidate, subject, mode).found


def _aligned(baseline: Run, candidate: Run, subject: str) -> Aligned:
    if baseline.dataset_id == candidate.dataset_id:
        return _aligned_in_dataset(baseline, candidate, subject)
    return _aligned_by_key(baseline, candidate, subject)


def _aligned_by_key(baseline: Run, candidate: Run, subject: str) -> Aligned:
    """Two datasets (versions sharing keys): items paired by key."""
    before, after = judge_values(baseline, subject), judge_values(candidate, subject)
    # Sorting 100k keys the way people count takes a second: done once per results.
    keys = sorted(set(before) | set(after), key=natural_key)

    def arrays(found: dict[str, tuple[int, float | None]]) -> tuple[np.ndarray, np.ndarray]:
        pairs = [found.get(key, (0, None)) for key in keys]
        items = np.fromiter((p[0] or 0 for p in pairs), dtype=np.int64, count=len(keys))
        values = np.array([np.nan if p[1] is None else p[1] for p in pairs], dtype=np.float64)
        return items, values

    b_items, b_values = arrays(before)
    c_items, c_values = arrays(after)
    index = {key: at for at, key in enumerate(keys)}
    return Aligned(keys, index, b_items, c_items, b_values, c_values)


def _aligned_in_dataset(baseline: Run, candidate: Run, subject: str) -> Aligned:
    """Two runs over one dataset: its items in the order people count keys, every array read
    as the boards keep them (stored once a run ended: a first visit reads two rows)."""
    found = item_arrays.dataset_items(baseline.dataset)
    judged = [item_arrays.judge_arrays(run) for run in (baseline, candidate)]
    missing = np.zeros(len(found.ids), dtype=bool)
    scored = [arrays.scored.get(subject, missing) for arrays in judged]
    # Items neither run scored are not compared (as items neither has a key of).
    order = found.counted[(scored[0] | scored[1])[found.counted]]
    keys = found.keys[order].tolist()
    nan = np.full(len(found.ids), np.nan)
    values = [arrays.values.get(subject, nan)[order] for arrays in judged]
    ids = [np.where(mask, found.ids, 0)[order] for mask in scored]
    index = {key: at for at, key in enumerate(keys)}
    return Aligned(keys, index, ids[0], ids[1], values[0], values[1])


def _with_overrides(aligned: Aligned, values: np.ndarray, run: Run, subject: str) -> np.ndarray:
    changed = overrides(run, subject)
    if not changed:
        return values
    values = values.copy()
    for key, (_, value) in changed.items():
        if (at := aligned.index.get(key)) is not None:  # every score's key is aligned
            values[at] = value
    return values


def _compared(baseline: Run, candidate: Run, subject: str, mode: str) -> Compared:
    judge = judge_of(baseline) if judge_id_of(baseline) else None
    infos = {info.name: info for info in subject_infos(judge)} if judge else {}
    higher = infos[subject].higher_is_better if subject in infos else True
    aligned = ALIGNED.get_or_compute(
        ((baseline.pk, run_state(baseline)), (candidate.pk, run_state(candidate)), subject),
        lambda: _aligned(baseline, candidate, subject),
    )
    b, c = aligned.baseline, aligned.candidate
    if mode == "human":
        b = _with_overrides(aligned, b, baseline, subject)
        c = _with_overrides(aligned, c, candidate, subject)
    missing_b, missing_c = np.isnan(b), np.isnan(c)
    change = c - b  # NaN where either is missing
    gain = np.nan_to_num(change if higher else -change, nan=0.0)
    states = np.full(len(b), RANK[UNCHANGED], dtype=np.int8)
    states[gain > 0] = RANK[IMPROVED]
    states[gain < 0] = RANK[REGRESSED]
    states[missing_b != missing_c] = RANK[FAILED]
    shown = np.flatnonzero(~(missing_b & missing_c))  # failed in both: left out
    # Worst regression first, biggest improvement first; ties in item order (the index).
    second = np.where(states == RANK[REGRESSED], gain, -gain)
    order = shown[np.lexsort((shown, second[shown], states[shown]))]
    values = Values(b, c, change, states)
    by_state = {
        state: Changes(aligned, order[states[order] == RANK[state]], values) for state in STATES
    }
    return Compared(Changes(aligned, order, values), by_state)


def counts(found: Sequence[Change]) -> list[tuple[str, str, int]]:
    """(state, its label, how many items) for each state, in the page's order."""
    return [(state, LABELS[state], sum(1 for c in found if c.state == state)) for state in STATES]


def subjects_of(baseline: Run, candidate: Run) -> list[str]:
    """The subjects both runs' judges score, in the baseline judge's order."""
    mine = judge_of(baseline).subject_names if judge_id_of(baseline) else []
    theirs = set(judge_of(candidate).subject_names if judge_id_of(candidate) else [])
    return [name for name in mine if name in theirs]


def texts_of(run: Run, item_ids: list[int]) -> dict[int, str]:
    """item id -> the response the judge scored, as text (as the review page shows it: the
    source run's first judged epoch, or the dataset's column); one query for a whole page."""
    ids = [pk for pk in item_ids if pk is not None]
    found: dict[int, str] = {}
    if run.source_run_id:
        responses = Response.objects.filter(
            run_id=run.source_run_id, item_id__in=ids, epoch__lt=run.judged_epochs
        ).order_by("-epoch")  # the first epoch written last wins
        found = dict(responses.values_list("item_id", "text"))
    elif run.source_column:
        for pk, fields in Item.objects.filter(pk__in=ids).values_list("pk", "fields"):
            text = fields.get(run.source_column)
            found[pk] = "" if text is None else text if isinstance(text, str) else str(text)
    return found


def word_diff(before: str, after: str) -> str:
    """HTML of `after` against `before`, word by word: removed words in <del>, added ones in
    <ins>. Every piece of text is escaped (model output is hostile)."""
    a, b = re.findall(r"\s+|[^\s]+", before), re.findall(r"\s+|[^\s]+", after)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append(html.escape("".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            out.append(f"<del>{html.escape(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            out.append(f"<ins>{html.escape(''.join(b[j1:j2]))}</ins>")
    return "".join(out)


@dataclass(frozen=True)
class Shown:
    """One row of the page: the change, links to both reviews, the responses' diff."""

    change: Change
    url_baseline: str
    url_candidate: str
    diff: str
    same_text: bool


def shown(baseline: Run, candidate: Run, page: list[Change]) -> Iterator[Shown]:
    texts_a = texts_of(baseline, [c.baseline_item for c in page if c.baseline_item])
    texts_b = texts_of(candidate, [c.candidate_item for c in page if c.candidate_item])
    for change in page:
        before = texts_a.get(change.baseline_item, "") if change.baseline_item else ""
        after = texts_b.get(change.candidate_item, "") if change.candidate_item else ""
        yield Shown(
            change,
            review_url(baseline.pk, change.baseline_item) if change.baseline_item else "",
            review_url(candidate.pk, change.candidate_item) if change.candidate_item else "",
            word_diff(before, after),
            before == after,
        )


CSV_HEADER = ["item", "subject", "baseline", "candidate", "change", "state"]


def csv_rows(found: Sequence[Change], subject: str) -> Iterator[list[Any]]:
    for c in found:
        yield [c.key, subject, c.baseline, c.candidate, c.change, c.label]
