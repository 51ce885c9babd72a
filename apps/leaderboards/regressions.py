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
from apps.leaderboards.compare import item_values, natural_key, review_url
from apps.leaderboards.subjects import subject_infos
from apps.review.display import response_of
from apps.runs.models import Run

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


def changes(baseline: Run, candidate: Run, subject: str, mode: str = "human") -> list[Change]:
    """Every item either run scored on `subject` (failed in both left out: nothing changed
    that a person can act on), most regressed first, then failed in one, then most improved,
    then unchanged; ties in item order."""
    infos = {info.name: info for info in subject_infos(baseline.judge)} if baseline.judge else {}
    higher = infos[subject].higher_is_better if subject in infos else True
    before = item_values(baseline, mode).get(subject, {})
    after = item_values(candidate, mode).get(subject, {})
    found = []
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

    def order(change: Change) -> tuple[int, float, tuple[tuple[int, int | str], ...]]:
        gain = 0.0 if change.change is None else (change.change if higher else -change.change)
        rank = {REGRESSED: 0, FAILED: 1, IMPROVED: 2, UNCHANGED: 3}[change.state]
        return rank, (gain if change.state == REGRESSED else -gain), natural_key(change.key)

    return sorted(found, key=order)


def counts(found: list[Change]) -> list[tuple[str, str, int]]:
    """(state, its label, how many items) for each state, in the page's order."""
    return [(state, LABELS[state], sum(1 for c in found if c.state == state)) for state in STATES]


def subjects_of(baseline: Run, candidate: Run) -> list[str]:
    """The subjects both runs' judges score, in the baseline judge's order."""
    mine = baseline.judge.subject_names if baseline.judge else []
    theirs = set(candidate.judge.subject_names if candidate.judge else [])
    return [name for name in mine if name in theirs]


def text_of(run: Run, item_id: int | None) -> str:
    """The response the judge scored for one item, as text ("" when there is none)."""
    if item_id is None:
        return ""
    item = Item.objects.filter(pk=item_id).first()
    if item is None:
        return ""
    found: dict[str, Any] = response_of(run, item)
    text = found.get("text")
    return "" if text is None else text if isinstance(text, str) else str(text)


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
    for change in page:
        before = text_of(baseline, change.baseline_item)
        after = text_of(candidate, change.candidate_item)
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
