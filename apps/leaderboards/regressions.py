"""Regressions between two runs (#28.4): a baseline and a candidate judged on the same items,
every item with its two values, what changed, and a word-level diff of the two responses.

Items pair by key, as on the compare page. "Better" follows the subject's direction (higher is
better unless the judge or metric says otherwise), so a regression is a change for the worse
whatever the scale."""

import difflib
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from apps.datasets.models import Item
from apps.judges.models import Score, ScoreEvent, judge_id_of, judge_of
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


@dataclass(frozen=True)
class Compared:
    """Every change between two runs on one subject, in the page's order, with each state's."""

    found: list[Change]
    by_state: dict[str, list[Change]]

    def counts(self) -> list[tuple[str, str, int]]:
        """(state, its label, how many items) for each state, in the page's order."""
        return [(state, LABELS[state], len(self.by_state.get(state, []))) for state in STATES]


# Pairing 100k items of two runs takes a second, paging through them should not: comparisons
# are kept, keyed by both runs' results and, for human values, the reviews; each run's judge
# values are kept by its results alone, so after a review only the overrides are read again
# (see memo.py).
COMPARED: Memo[Compared] = Memo("regressions", size=16)
JUDGED: Memo[dict[str, tuple[int, float | None]]] = Memo("regressions: judge values", size=32)
KEY_ORDER: Memo[dict[str, int]] = Memo("regressions: item order", size=16)


def values_of(run: Run, subject: str, mode: str) -> dict[str, tuple[int, float | None]]:
    """item key -> (item id, value or None when the item failed), the human value where a
    review set one (`mode` "human")."""
    judged = JUDGED.get_or_compute(
        (run.pk, run_state(run), subject),
        lambda: item_values(run, "judge", subject).get(subject, {}),
    )
    if mode != "human":
        return judged
    # As the boards do: only scores with a value-setting event can differ from the judge.
    overridden = Score.objects.filter(
        run_id=run.pk,
        subject=subject,
        pk__in=ScoreEvent.objects.filter(kind__in=ScoreEvent.SETS_VALUE).values("score_id"),
        override_value__isnull=False,
    ).values_list("item__key", "item_id", "override_value")
    changed = {key: (item_id, value) for key, item_id, value in overridden}
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


def changes(baseline: Run, candidate: Run, subject: str, mode: str = "human") -> list[Change]:
    """Every item either run scored on `subject` (failed in both left out: nothing changed
    that a person can act on), most regressed first, then failed in one, then most improved,
    then unchanged; ties in item order."""
    return compared(baseline, candidate, subject, mode).found


def _compared(baseline: Run, candidate: Run, subject: str, mode: str) -> Compared:
    judge = judge_of(baseline) if judge_id_of(baseline) else None
    infos = {info.name: info for info in subject_infos(judge)} if judge else {}
    higher = infos[subject].higher_is_better if subject in infos else True
    before = values_of(baseline, subject, mode)
    after = values_of(candidate, subject, mode)
    found: list[Change] = []
    for key in set(before) | set(after):
        b_item, b = before.get(key, (None, None))
        c_item, c = after.get(key, (None, None))
        if b is None and c is None:
            continue
        if b is None or c is None:
            state, change = FAILED, None
        else:
            change = c - b
            better = change > 0 if higher else change < 0
            state = UNCHANGED if change == 0 else IMPROVED if better else REGRESSED
        found.append(Change(key, b_item, c_item, b, c, state, change))

    rank = {REGRESSED: 0, FAILED: 1, IMPROVED: 2, UNCHANGED: 3}
    # Item order, the ties' order, is kept with the runs' values: a review changes values,
    # never keys, and sorting 100k keys the way people count takes a second.
    positions = KEY_ORDER.get_or_compute(
        ((baseline.pk, run_state(baseline)), (candidate.pk, run_state(candidate)), subject),
        lambda: {key: n for n, key in enumerate(sorted(set(before) | set(after), key=natural_key))},
    )
    last = len(positions)

    def order(change: Change) -> tuple[int, float, int]:
        gain = 0.0 if change.change is None else (change.change if higher else -change.change)
        return (
            rank[change.state],
            (gain if change.state == REGRESSED else -gain),
            positions.get(change.key, last),
        )

    found.sort(key=order)
    by_state: dict[str, list[Change]] = {state: [] for state in STATES}
    for each in found:
        by_state[each.state].append(each)
    return Compared(found, by_state)


def counts(found: list[Change]) -> list[tuple[str, str, int]]:
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


def csv_rows(found: list[Change], subject: str) -> Iterator[list[Any]]:
    for c in found:
        yield [c.key, subject, c.baseline, c.candidate, c.change, c.label]
