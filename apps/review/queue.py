"""Which items of a judge run need review, and the orders in which the queue serves them.

Every order is a total order on items, so "next after the current item" is well defined while
others review, lock and unlock items. Cheap orders (file order, failed or flaky first) are keyset
queries on the item's position; costly ones (uncertainty, the sample) are computed once per
state of the run's results and cached, then walked in chunks.
"""

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.core.cache import cache
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    FloatField,
    Func,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from apps.datasets.models import Item
from apps.judges.models import RunItemQuerySet, Score, ScoreEvent, TaskJudging, judge_of
from apps.review.models import Review, ReviewAssignment, ReviewClaim, ReviewLock, ReviewPolicy
from apps.review.sample import active_sample, sample_order
from apps.runs.models import Run

ORDERS = {
    "position": "File order",
    "failed": "Failed first",
    "flaky": "Flaky first (epochs disagree)",
    "doubtful": "Needs a person first",
    "uncertain": "Uncertainty first",
    "sample": "Random sample by tag",
    # The policy's recorded random sample: the reviews the judge-corrected board learns from.
    "random": "The policy's random sample",
    "unreviewed": "Unreviewed only",
}
MAX_SAMPLE = 5000
FAR = 1e9  # "no value to be near a threshold": sorts last
CACHE_SECONDS = 3600
CHUNK = 500


# ---- caching what only the judge's results decide ----------------------------------------
def orders_for(run: Run) -> dict[str, str]:
    """The orders a run's queue offers: "flaky first" only where the responses have epochs,
    "needs a person first" where the task has a rule for it, the policy's random sample where
    the policy draws one."""
    return {
        k: v
        for k, v in ORDERS.items()
        if (k != "flaky" or run.judged_epochs > 1)
        and (k != "doubtful" or TaskJudging.of(run.task_id).doubts)
        and (k != "random" or ReviewPolicy.of(run.task_id).has_sample)
    }


def last_event_id() -> int:
    """Moves with every human change (each leaves a ScoreEvent); one index lookup."""
    return ScoreEvent.objects.aggregate(last=Max("pk"))["last"] or 0


def review_counts(run: Run, last_event: int | None = None) -> dict[str, int]:
    """Items judged, failed and fully reviewed in a judge run.

    Counting means scanning every score of the run (a few hundred ms at 100k items), so the
    answer is cached until the results or any review change.
    """
    if last_event is None:
        last_event = last_event_id()
    key = f"review:counts:{run.results_fingerprint}:{last_event}"
    counts = cache.get(key)
    if counts is None:
        counts = _count(run)
        cache.set(key, counts, CACHE_SECONDS)
    return counts


def _count(run: Run) -> dict[str, int]:
    scores = Score.objects.filter(run=run).order_by()
    total = scores.values("item_id").distinct().count()
    open_items = scores.unreviewed().values("item_id").distinct().count()
    failed = RunItemQuerySet.of(run).failed().count()
    return {"total": total, "failed": failed, "reviewed": total - open_items}


# ---- the stratified sample ---------------------------------------------------------------
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
            # Blind mode waits for the reviewer's own value, which a viewer cannot give.
            blind=params.get("blind") == "1" and getattr(user, "can_edit", False),
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
        if self.order == "random" and self.policy.has_sample:
            label += f": {self.policy.sample_label}"
        return label

    @cached_property
    def policy(self) -> ReviewPolicy:
        return ReviewPolicy.of(self.run.task_id)

    # ---- filters -------------------------------------------------------------------------
    def scoped(self, qs: RunItemQuerySet) -> RunItemQuerySet:
        """Judged items this reviewer may be served: theirs if assigned, nobody else's."""
        qs = qs.judged()
        assignments = ReviewAssignment.objects.filter(run=self.run, item=OuterRef("pk"))
        if self.mine:
            return qs.filter(Exists(assignments.filter(user_id=self.user.pk)))
        return qs.exclude(Exists(assignments.exclude(user_id=self.user.pk)))

    def servable(self, qs: RunItemQuerySet) -> RunItemQuerySet:
        """Of those, what "next" may serve now: not reviewed (if asked), not held by another;
        with several reviews per item, one this reviewer has not reviewed whose reviews and
        others' live claims are still short of the target."""
        if self.policy.several:
            return self._wanting_reviews(qs)
        if self.unreviewed:
            qs = qs.unreviewed()
        locks = ReviewLock.objects.live().filter(run=self.run, item=OuterRef("pk"))
        return qs.exclude(Exists(locks.exclude(user_id=self.user.pk)))

    def _wanting_reviews(self, qs: RunItemQuerySet) -> RunItemQuerySet:
        reviews = Review.objects.filter(score__run_id=self.run.pk, score__item_id=OuterRef("pk"))
        people = (
            reviews.order_by()
            .values("score__item_id")
            .annotate(n=Count("user_id", distinct=True))
            .values("n")
        )
        begun = Review.objects.filter(
            score__run_id=self.run.pk,
            score__item_id=OuterRef("item_id"),
            user_id=OuterRef("user_id"),
        )
        claims = (
            ReviewClaim.live()
            .filter(run_id=self.run.pk, item_id=OuterRef("pk"))
            .exclude(user_id=self.user.pk)
            # Someone who has begun the item is counted among its reviewers already.
            .exclude(Exists(begun))
            .order_by()
            .values("item_id")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return (
            qs.exclude(Exists(reviews.filter(user_id=self.user.pk)))
            .alias(
                q_taken=Coalesce(Subquery(people), Value(0)) + Coalesce(Subquery(claims), Value(0))
            )
            .filter(q_taken__lt=self.policy.reviews_per_item)
        )

    # ---- walking -------------------------------------------------------------------------
    def neighbours(self, current: Item | None, forward: bool = True, limit: int = 10) -> list[Item]:
        """The next (or previous) items after `current` in this order.

        Going forward skips reviewed items (if asked) and items someone else holds;
        going back returns to the item before, whatever its state, so a reviewer can
        look again at what they just did.
        """
        if self.order in ("uncertain", "sample", "random"):
            return self._listed_neighbours(self.ordered_ids, current, forward, limit)
        return self._segment_neighbours(current, forward, limit)

    def _segments(self) -> list[RunItemQuerySet]:
        """The order as consecutive runs of items, each in file order."""
        items = RunItemQuerySet.of(self.run)
        if self.order == "failed":
            return [items.failed(), items.not_failed()]
        if self.order == "flaky":
            return [items.flaky(), items.not_flaky()]
        if self.order == "doubtful":
            return [items.doubtful(), items.not_doubtful()]
        return [items]

    def _segment_neighbours(self, current: Item | None, forward: bool, limit: int) -> list[Item]:
        segments = self._segments()
        at = 0 if forward else len(segments)
        if current is not None:
            at = next(
                (i for i, seg in enumerate(segments) if seg.filter(pk=current.pk).exists()), at
            )
        found: list[Item] = []
        steps = range(at, len(segments)) if forward else range(min(at, len(segments) - 1), -1, -1)
        for index in steps:
            qs = self.scoped(segments[index])
            if current is not None and index == at:
                beyond = "gt" if forward else "lt"
                qs = qs.filter(**{f"position__{beyond}": current.position})
            if forward:
                qs = self.servable(qs)
            found += qs.order_by("position" if forward else "-position")[: limit - len(found)]
            if len(found) >= limit:
                break
        return found

    @cached_property
    def ordered_ids(self) -> list[int]:
        """Every item of a costly order, first to last; cached per state of the results."""
        key = (
            f"review:order:{self.run.results_fingerprint}:{self.order}:"
            f"{self.threshold}:{self.n}:{self.seed}"
        )
        if self.order == "random":
            key += f":{self.policy.sample_percent}:{self.policy.sample_seed}"
            key += f":{self.policy.sample_design}"
        ids = cache.get(key)
        if ids is None:
            if self.order == "random":
                ids = self._policy_sample_ids()
            else:
                ids = self._sample_ids() if self.order == "sample" else self._uncertain_ids()
            cache.set(key, ids, CACHE_SECONDS)
        return ids

    def _policy_sample_ids(self) -> list[int]:
        """The judged items of the policy's random sample of the dataset, in the order of
        their draws (apps/review/sample.py); none when the policy draws no sample."""
        if not self.policy.has_sample:
            return []
        judged = set(RunItemQuerySet.of(self.run).judged().values_list("pk", flat=True))
        if self.policy.is_active:  # in the order of draw / probability (apps/review/sample.py)
            return [
                pk for pk in active_sample(self.policy, self.run.dataset).order() if pk in judged
            ]
        rows = list(
            Item.objects.filter(dataset_id=self.run.dataset_id)
            .order_by("position")
            .values_list("pk", "key")
        )
        picked = [
            rows[i][0]
            for i in sample_order(
                [key for _, key in rows], self.policy.sample_percent or 0, self.policy.sample_seed
            )
        ]
        return [pk for pk in picked if pk in judged]

    def _sample_ids(self) -> list[int]:
        # Drawn from every judged item, whoever asks: the same seed gives everyone the same
        # sample; assignments and locks only decide who is served which of its items.
        rows = (
            RunItemQuerySet.of(self.run)
            .judged()
            .order_by("position")
            .values_list("pk", "tags_text")
        )
        return stratified_sample(((pk, first_tag(tags)) for pk, tags in rows), self.n, self.seed)

    def _per_subject(self, make: Any, default: Any) -> Case:
        whens = [
            When(subject=subject["name"], then=make(subject))
            for subject in judge_of(self.run).subjects
        ]
        return Case(*whens, default=default, output_field=FloatField())

    @staticmethod
    def _width(subject: dict[str, Any]) -> float:
        return float(subject["max"]) - float(subject["min"]) or 1.0

    def _uncertain_ids(self) -> list[int]:
        """Largest disagreement between rounds (as a share of each subject's range) first,
        then the judge value nearest the threshold (each subject's midpoint unless chosen),
        then file order. Items with no value at all (failed) come last."""

        def distance(subject: dict[str, Any]) -> Any:
            low, high = float(subject["min"]), float(subject["max"])
            threshold = self.threshold if self.threshold is not None else (low + high) / 2
            gap = Func(F("judge_value") - Value(threshold), function="ABS")
            return gap / Value(self._width(subject))

        spread = self._per_subject(lambda s: F("spread") / Value(self._width(s)), F("spread"))
        near = self._per_subject(distance, Value(FAR))
        rows = (
            Score.objects.filter(run=self.run)
            .order_by()
            .values("item_id")
            .annotate(
                q_spread=Max(Coalesce(spread, Value(0.0))),
                q_near=Min(Coalesce(near, Value(FAR))),
                q_position=Max("item__position"),
            )
            .order_by("-q_spread", "q_near", "q_position")
            .values_list("item_id", flat=True)
        )
        return list(rows)

    def _listed_neighbours(
        self, ids: list[int], current: Item | None, forward: bool, limit: int
    ) -> list[Item]:
        if current is not None and current.pk in ids:
            at = ids.index(current.pk)
            ahead = ids[at + 1 :] if forward else ids[:at][::-1]
        else:
            ahead = ids if forward else []
        found: list[Item] = []
        for start in range(0, len(ahead), CHUNK):
            chunk = ahead[start : start + CHUNK]
            qs = self.scoped(RunItemQuerySet.of(self.run).filter(pk__in=chunk))
            if forward:
                qs = self.servable(qs)
            by_pk = {item.pk: item for item in qs}
            found.extend(by_pk[pk] for pk in chunk if pk in by_pk)
            if len(found) >= limit:
                break
        return found[:limit]

    def position_of(self, item: Item) -> tuple[int, int] | None:
        """(1-based place, size) of the item in a sample queue; other orders are open-ended."""
        if self.order not in ("sample", "random") or item.pk not in self.ordered_ids:
            return None
        return self.ordered_ids.index(item.pk) + 1, len(self.ordered_ids)

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
                if self.policy.several:
                    target = self.policy.reviews_per_item
                    if ReviewClaim.claim(self.run, item, self.user, target) or not forward:
                        ReviewClaim.objects.filter(run=self.run, user=self.user).exclude(
                            item=item
                        ).delete()
                        return item
                elif ReviewLock.claim(self.run, item, self.user) or not forward:
                    ReviewLock.release_others(self.run, self.user, keep_item_id=item.pk)
                    return item
        return None


def as_int(condition: Q) -> Case:
    return Case(When(condition, then=Value(1)), default=Value(0), output_field=IntegerField())
