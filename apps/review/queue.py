"""Which items of a judge run need review, and the orders in which the queue serves them.

Every order is a total order on items (its keys end with the item's unique position), so
"next after the current item" is a keyset query: it stays right while others review,
lock and unlock items, and it costs the same at 100k items as at 100.
"""

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    FloatField,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from apps.datasets.models import Item
from apps.judges.models import JudgeRound, Score
from apps.review.models import ReviewAssignment, ReviewLock
from apps.runs.models import Run

ORDERS = {
    "position": "File order",
    "failed": "Failed first",
    "uncertain": "Uncertainty first",
    "sample": "Random sample by tag",
    "unreviewed": "Unreviewed only",
}
MAX_SAMPLE = 5000
FAR = 1e9  # "no value to be near a threshold": sorts last


# ---- per-item review state, as SQL expressions over one judge run --------------------------
def _scores(run: Run) -> QuerySet[Score]:
    return Score.objects.filter(run=run, item=OuterRef("pk"))


def _rounds(run: Run) -> QuerySet[JudgeRound]:
    return JudgeRound.objects.filter(run=run, item=OuterRef("pk"))


def judged_q(run: Run) -> Q:
    """The judge has produced something for the item: a score or at least a (failed) round."""
    return Q(Exists(_scores(run))) | Q(Exists(_rounds(run)))


def failed_q(run: Run) -> Q:
    return Q(Exists(_scores(run).failed())) | Q(
        Exists(_rounds(run).filter(status=JudgeRound.Status.FAILED))
    )


def unreviewed_q(run: Run) -> Q:
    return Q(Exists(_scores(run).unreviewed()))


def as_int(condition: Q) -> Case:
    return Case(When(condition, then=Value(1)), default=Value(0), output_field=IntegerField())


def run_items(run: Run) -> QuerySet[Item]:
    return Item.objects.filter(dataset_id=run.dataset_id)


def review_counts(run: Run) -> dict[str, int]:
    """Items judged, failed and fully reviewed in a judge run: one query."""
    counts = (
        run_items(run)
        .filter(judged_q(run))
        .annotate(q_failed=as_int(failed_q(run)), q_open=as_int(unreviewed_q(run)))
        .aggregate(total=Count("pk"), failed=Sum("q_failed"), open=Sum("q_open"))
    )
    return {
        "total": counts["total"],
        "failed": counts["failed"] or 0,
        "reviewed": counts["total"] - (counts["open"] or 0),
    }


def stratified_sample(rows: Iterable[tuple[int, str]], n: int, seed: int) -> list[int]:
    """N ids drawn at random within each stratum, proportionally to its size (largest remainder).

    `rows` are (id, stratum) in a stable order; the same rows, n and seed give the same sample.
    """
    strata: dict[str, list[int]] = {}
    for pk, stratum in rows:
        strata.setdefault(stratum, []).append(pk)
    total = sum(len(members) for members in strata.values())
    n = max(0, min(n, total))
    if n == 0:
        return []
    exact = {name: n * len(members) / total for name, members in strata.items()}
    quota = {name: math.floor(share) for name, share in exact.items()}
    left = n - sum(quota.values())
    for name in sorted(strata, key=lambda s: (quota[s] - exact[s], s))[:left]:
        quota[name] += 1
    rng = random.Random(seed)
    picked: list[int] = []
    for name in sorted(strata):
        picked.extend(rng.sample(strata[name], quota[name]))
    rng.shuffle(picked)  # so the queue does not serve one tag after another
    return picked


def first_tag(tags_text: str) -> str:
    """The stratum of an item: its first tag ("|a|b|" → "a"), or "" when untagged."""
    parts = [part for part in (tags_text or "").split("|") if part]
    return parts[0] if parts else ""


# ---- the queue ---------------------------------------------------------------------------
def _to_float(raw: str | None) -> float | None:
    try:
        value = float(raw) if raw not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _to_int(raw: str | None, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(raw or default)))
    except ValueError:
        return default


@dataclass
class Queue:
    """One reviewer's way through a judge run: an order plus filters."""

    run: Run
    user: Any
    order: str = "position"
    unreviewed: bool = False
    mine: bool = False
    blind: bool = False
    threshold: float | None = None
    n: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        if self.order == "unreviewed":
            self.unreviewed = True

    @classmethod
    def from_params(cls, run: Run, user: Any, params: Mapping[str, str]) -> "Queue":
        order = params.get("order") or "position"
        return cls(
            run=run,
            user=user,
            order=order if order in ORDERS else "position",
            unreviewed=params.get("unreviewed") == "1",
            mine=params.get("mine") == "1",
            blind=params.get("blind") == "1",
            threshold=_to_float(params.get("threshold")),
            n=_to_int(params.get("n"), 50, 1, MAX_SAMPLE),
            seed=_to_int(params.get("seed"), 0, 0, 2**31 - 1),
        )

    def params(self) -> dict[str, str]:
        """What links and forms carry so the next page serves the same queue."""
        out = {"order": self.order}
        if self.unreviewed and self.order != "unreviewed":
            out["unreviewed"] = "1"
        if self.mine:
            out["mine"] = "1"
        if self.blind:
            out["blind"] = "1"
        if self.threshold is not None and self.order == "uncertain":
            out["threshold"] = f"{self.threshold:g}"
        if self.order == "sample":
            out["n"], out["seed"] = str(self.n), str(self.seed)
        return out

    @property
    def label(self) -> str:
        label = ORDERS[self.order]
        if self.order == "sample":
            label += f" (n={self.n}, seed={self.seed})"
        return label

    # ---- filters -------------------------------------------------------------------------
    def members(self) -> QuerySet[Item]:
        """Items this queue can ever serve, whoever holds them right now."""
        qs = run_items(self.run).filter(judged_q(self.run))
        assignments = ReviewAssignment.objects.filter(run=self.run, item=OuterRef("pk"))
        if self.mine:
            qs = qs.filter(Exists(assignments.filter(user=self.user)))
        elif self.user.is_authenticated:
            qs = qs.exclude(Exists(assignments.exclude(user=self.user)))
        return qs

    def servable(self, qs: QuerySet[Item]) -> QuerySet[Item]:
        """Of those, what "next" may serve now: not reviewed (if asked), not held by another."""
        if self.unreviewed:
            qs = qs.filter(unreviewed_q(self.run))
        locks = ReviewLock.objects.live().filter(run=self.run, item=OuterRef("pk"))
        return qs.exclude(Exists(locks.exclude(user=self.user)))

    # ---- keys ----------------------------------------------------------------------------
    def _per_subject(self, make: Any, default: Any) -> Case:
        whens = [
            When(subject=subject["name"], then=make(subject)) for subject in self.run.judge.subjects
        ]
        return Case(*whens, default=default, output_field=FloatField())

    @staticmethod
    def _width(subject: dict[str, Any]) -> float:
        return float(subject["max"]) - float(subject["min"]) or 1.0

    def _spread_key(self) -> Coalesce:
        """Largest disagreement between rounds over the item's subjects, as a share of range."""
        norm = self._per_subject(lambda s: F("spread") / Value(self._width(s)), F("spread"))
        worst = (
            Score.objects.filter(run=self.run, item=OuterRef("pk"))
            .annotate(k=Coalesce(norm, Value(0.0)))
            .order_by("-k")
            .values("k")[:1]
        )
        return Coalesce(Subquery(worst, output_field=FloatField()), Value(0.0))

    def _near_key(self) -> Coalesce:
        """Smallest distance of a judge value to the threshold (the midpoint unless chosen)."""

        def distance(subject: dict[str, Any]) -> Any:
            low, high = float(subject["min"]), float(subject["max"])
            threshold = self.threshold if self.threshold is not None else (low + high) / 2
            gap = Func(F("judge_value") - Value(threshold), function="ABS")
            return gap / Value(self._width(subject))

        norm = self._per_subject(distance, Value(FAR))
        nearest = (
            Score.objects.filter(run=self.run, item=OuterRef("pk"))
            .annotate(k=Coalesce(norm, Value(FAR)))
            .order_by("k")
            .values("k")[:1]
        )
        return Coalesce(Subquery(nearest, output_field=FloatField()), Value(FAR))

    def keys(self) -> list[tuple[str, bool]]:
        """(annotation, descending) pairs, most significant first; position breaks all ties."""
        return {
            "failed": [("q_failed", True), ("position", False)],
            "uncertain": [("q_spread", True), ("q_near", False), ("position", False)],
        }.get(self.order, [("position", False)])

    def keyed(self, qs: QuerySet[Item]) -> QuerySet[Item]:
        if self.order == "failed":
            return qs.annotate(q_failed=as_int(failed_q(self.run)))
        if self.order == "uncertain":
            return qs.annotate(q_spread=self._spread_key(), q_near=self._near_key())
        return qs

    # ---- walking -------------------------------------------------------------------------
    def neighbours(self, current: Item | None, forward: bool = True, limit: int = 10) -> list[Item]:
        """The next (or previous) items after `current` in this order.

        Going forward skips reviewed items (if asked) and items someone else holds;
        going back returns to the item before, whatever its state, so a reviewer can
        look again at what they just did.
        """
        if self.order == "sample":
            return self._sample_neighbours(current, forward, limit)
        keys = self.keys()
        qs = self.keyed(self.members())
        if current is not None:
            values = qs.filter(pk=current.pk).values(*[name for name, _ in keys]).first()
            if values is not None:
                qs = qs.filter(_beyond(keys, values, forward))
        if forward:
            qs = self.servable(qs)
        ordering = [("-" if desc == forward else "") + name for name, desc in keys]
        return list(qs.order_by(*ordering)[:limit])

    @cached_property
    def sample_ids(self) -> list[int]:
        rows = self.members().order_by("position").values_list("pk", "tags_text")
        return stratified_sample(((pk, first_tag(tags)) for pk, tags in rows), self.n, self.seed)

    def _sample_neighbours(self, current: Item | None, forward: bool, limit: int) -> list[Item]:
        ids = self.sample_ids
        if current is not None and current.pk in ids:
            at = ids.index(current.pk)
            ahead = ids[at + 1 :] if forward else ids[:at][::-1]
        else:
            ahead = ids if forward else []
        found: list[Item] = []
        for start in range(0, len(ahead), 500):
            chunk = ahead[start : start + 500]
            qs = run_items(self.run).filter(pk__in=chunk)
            if forward:
                qs = self.servable(qs)
            by_pk = {item.pk: item for item in qs}
            found.extend(by_pk[pk] for pk in chunk if pk in by_pk)
            if len(found) >= limit:
                break
        return found[:limit]

    def position_of(self, item: Item) -> tuple[int, int] | None:
        """(1-based place, size) of the item in a sample queue; other orders are open-ended."""
        if self.order != "sample" or item.pk not in self.sample_ids:
            return None
        return self.sample_ids.index(item.pk) + 1, len(self.sample_ids)

    def claim_next(self, current: Item | None, forward: bool = True) -> Item | None:
        """Serve the next item and lock it for this reviewer; None when the queue is done.

        Another reviewer may claim a candidate between the query and the claim: then the
        unique lock refuses this one and the next candidate is tried.
        """
        for _ in range(5):
            candidates = self.neighbours(current, forward)
            if not candidates:
                return None
            for item in candidates:
                if ReviewLock.claim(self.run, item, self.user) or not forward:
                    ReviewLock.release_others(self.run, self.user, keep_item_id=item.pk)
                    return item
        return None


def _beyond(keys: list[tuple[str, bool]], values: dict[str, Any], forward: bool) -> Q:
    """Rows strictly after (or before) `values` in the lexicographic order of `keys`."""
    beyond = Q(pk__in=[])
    equal = Q()
    for name, desc in keys:
        op = "lt" if desc == forward else "gt"
        beyond |= equal & Q(**{f"{name}__{op}": values[name]})
        equal &= Q(**{name: values[name]})
    return beyond
