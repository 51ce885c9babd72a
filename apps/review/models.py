import random
from collections import Counter
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from apps.datasets.models import Item, Task
from apps.judges.models import Score, ScoreEvent, judge_of
from apps.review.scales import is_two_valued
from apps.runs.models import Run


class ReviewLockQuerySet(models.QuerySet["ReviewLock"]):
    def live(self) -> "ReviewLockQuerySet":
        return self.filter(expires_at__gt=timezone.now())

    def held_by_others(self, user: Any) -> "ReviewLockQuerySet":
        return self.live().exclude(user=user)


class ReviewLock(models.Model):
    """A short claim on an item of a judge run's queue, so two reviewers are not served it at once."""

    TTL = timedelta(minutes=5)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="review_locks")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    expires_at = models.DateTimeField()

    objects = ReviewLockQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "item"], name="review_lock_once")]

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()

    @classmethod
    def claim(cls, run: Run, item: Item, user: Any, ttl: timedelta | None = None) -> bool:
        """Take or renew `user`'s lock on the item; False when someone else holds a live one.

        The unique (run, item) constraint decides races: of two reviewers claiming at once,
        exactly one insert succeeds.
        """
        now = timezone.now()
        expires = now + (ttl or cls.TTL)
        with transaction.atomic():
            cls.objects.filter(run=run, item=item, expires_at__lte=now).delete()
            if cls.objects.filter(run=run, item=item, user=user).update(expires_at=expires):
                return True
            try:
                with transaction.atomic():
                    cls.objects.create(run=run, item=item, user=user, expires_at=expires)
            except IntegrityError:
                return False
        return True

    @classmethod
    def release_others(cls, run: Run, user: Any, keep_item_id: int | None = None) -> None:
        """A reviewer works on one item of a run at a time: moving on frees the last one."""
        cls.objects.filter(run=run, user=user).exclude(item_id=keep_item_id).delete()

    @classmethod
    def holder(cls, run: Run, item: Item) -> "ReviewLock | None":
        return cls.objects.live().filter(run=run, item=item).select_related("user").first()


class ReviewAssignment(models.Model):
    """An item of a judge run handed to one reviewer: others' queues skip it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="review_assignments")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "item"], name="review_assignment_once")
        ]
        indexes = [models.Index(fields=["run", "user"])]

    @classmethod
    def assign(cls, run: Run, item_ids: list[int], user: Any, by: Any) -> int:
        """Hand these items to `user` (replacing earlier assignments); returns how many."""
        with transaction.atomic():
            ReviewAssignment.objects.filter(run=run, item_id__in=item_ids).delete()
            ReviewAssignment.objects.bulk_create(
                [
                    ReviewAssignment(run=run, item_id=pk, user=user, assigned_by=by)
                    for pk in item_ids
                ]
            )
        return len(item_ids)

    @classmethod
    def unassign(cls, run: Run, item_ids: list[int]) -> int:
        return cls.objects.filter(run=run, item_id__in=item_ids).delete()[0]


class BlindEntry(models.Model):
    """A reviewer's own value for a score, entered before the judge's value was shown.

    Blind mode reveals the judge's value only once this exists; kept as an unbiased
    human label for agreement statistics.
    """

    score = models.ForeignKey(Score, on_delete=models.CASCADE, related_name="blind_entries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    value = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["score", "user"], name="blind_entry_once")]


# ---- several reviewers per item ---------------------------------------------------------------
class ReviewPolicy(models.Model):
    """How a task's items are reviewed: by how many people each, when their disagreement needs
    an adjudicator, and who adjudicates besides admins. A task without one takes one review
    per item (the reviewer's override or confirmation is the human value)."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="review_policy")
    reviews_per_item = models.PositiveIntegerField(default=1)
    # subject → the largest spread (max − min of the reviews' values) still settled by
    # consensus; beyond it the item goes to adjudication. A subject not listed: 0, so any
    # disagreement is adjudicated.
    thresholds = models.JSONField(default=dict, blank=True)
    adjudicator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # "Review a random N % of items" (apps/review/sample.py): the sample the judge-corrected
    # board learns from, drawn with this seed, recorded so the board can name it. None: none.
    sample_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    sample_seed = models.PositiveIntegerField(default=0)
    sample_set_at = models.DateTimeField(null=True, blank=True)

    class Design(models.TextChoices):
        UNIFORM = "uniform", "Every item alike"
        # Active inference (#31.2): items the judge is least sure of are likelier drawn, each
        # with a recorded probability the board weights its review by (apps/review/sample.py).
        ACTIVE = "active", "Likelier where the judge is least sure (active)"

    sample_design = models.CharField(max_length=8, choices=Design.choices, default=Design.UNIFORM)
    MAX_REVIEWS = 10

    def __str__(self) -> str:
        return f"{self.task}: {self.reviews_per_item} reviews per item"

    @classmethod
    def of(cls, task_id: int) -> "ReviewPolicy":
        """The task's policy (unsaved defaults when it has none)."""
        return cls.objects.filter(task_id=task_id).first() or cls(task_id=task_id)

    @property
    def several(self) -> bool:
        return self.reviews_per_item > 1

    @property
    def has_sample(self) -> bool:
        return bool(self.sample_percent)

    @property
    def is_active(self) -> bool:
        return self.has_sample and self.sample_design == self.Design.ACTIVE

    @property
    def sample_label(self) -> str:
        """How the board and the queue name the sample, seed included."""
        if not self.has_sample:
            return ""
        if self.is_active:
            return (
                f"active sample of {self.sample_percent} % of items, likelier where the judge "
                f"is least sure (seed {self.sample_seed})"
            )
        return f"random {self.sample_percent} % of items (seed {self.sample_seed})"

    def threshold(self, subject: str) -> float:
        try:
            return max(0.0, float(self.thresholds.get(subject, 0)))
        except (TypeError, ValueError):
            return 0.0

    def check_direct_change(self, user: Any) -> None:
        """With several reviews per item a reviewer's value is a review, not an override: only
        an admin overrides, confirms or reverts a score directly."""
        if self.several and not user.is_admin:
            raise PermissionDenied(
                f"This task takes {self.reviews_per_item} reviews per item: submit your "
                "review; an admin or the adjudicator settles disagreements."
            )

    def may_adjudicate(self, user: Any) -> bool:
        return bool(user.is_authenticated and (user.is_admin or user.pk == self.adjudicator_id))


class SampleInclusion(models.Model):
    """An item's probability of being in an active sample and its draw, recorded when the
    sample is drawn (#31.2): the board weights the item's review by 1/probability, so the
    probability must be the one it was drawn with, not one recomputed from the judge's values
    after they changed. The item is in the sample when draw < probability."""

    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    percent = models.PositiveSmallIntegerField()
    seed = models.PositiveIntegerField()
    probability = models.FloatField()
    draw = models.FloatField()
    uncertainty = models.FloatField()  # what the probability was drawn from (judge's values)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "percent", "seed", "item"], name="one_inclusion_per_draw"
            )
        ]


class ReviewClaim(models.Model):
    """One reviewer's reservation of an item while reviews from several people are wanted:
    the queue hands an item out only while its reviews plus others' live claims are short of
    the target, so N reviewers at once exceed it by at most the open claims."""

    TTL = timedelta(minutes=10)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "item", "user"], name="review_claim_once")
        ]
        indexes = [models.Index(fields=["run", "item", "expires_at"])]

    @classmethod
    def live(cls) -> models.QuerySet["ReviewClaim"]:
        return cls.objects.filter(expires_at__gt=timezone.now())

    @classmethod
    def claim(cls, run: Run, item: Item, user: Any, target: int) -> bool:
        """Reserve the item for `user` if it still needs a review from someone new: False when
        they reviewed it already or others' reviews and live claims fill the target. The item's
        row is locked for the check (PostgreSQL); SQLite's IMMEDIATE transactions serialize it."""
        now = timezone.now()
        with transaction.atomic():
            Item.objects.select_for_update().filter(pk=item.pk).first()
            if cls.objects.filter(run=run, item=item, user=user).update(expires_at=now + cls.TTL):
                return not reviewed_by(run, item, user)
            if reviewed_by(run, item, user):
                return False
            # A claim of someone who has begun the item (reviewed a subject) is already
            # counted among its reviewers: counting it twice would leave a place unfilled.
            begun = Review.objects.filter(score__run=run, score__item=item).values("user_id")
            others = (
                cls.objects.filter(run=run, item=item, expires_at__gt=now)
                .exclude(user_id__in=begun)
                .count()
            )
            if reviewers_of(run, item) + others >= target:
                return False
            cls.objects.create(run=run, item=item, user=user, expires_at=now + cls.TTL)
        return True

    @classmethod
    def release(cls, run: Run, item: Item, user: Any) -> None:
        cls.objects.filter(run=run, item=item, user=user).delete()


def review_progress(run: Run, target: int) -> dict[str, Any]:
    """Overall and per reviewer: items with all their reviewers, items waiting for
    adjudication, and each reviewer's items and reviews in this run."""
    reviews = Review.objects.filter(score__run=run)
    per_item = (
        reviews.order_by()
        .values("score__item_id")
        .annotate(people=models.Count("user_id", distinct=True))
    )
    complete = sum(1 for row in per_item if row["people"] >= target)
    people = (
        reviews.order_by("user__username")
        .values("user__username")
        .annotate(items=models.Count("score__item_id", distinct=True), reviews=models.Count("pk"))
    )
    waiting = (
        Adjudication.objects.filter(score__run=run, settled_at__isnull=True)
        .values("score__item_id")
        .distinct()
        .count()
    )
    return {"complete": complete, "adjudication": waiting, "people": list(people)}


def reviewers_of(run: Run, item: Item) -> int:
    """How many people have reviewed the item (a review of any of its subjects counts)."""
    return (
        Review.objects.filter(score__run=run, score__item=item).values("user_id").distinct().count()
    )


def reviewed_by(run: Run, item: Item, user: Any) -> bool:
    return Review.objects.filter(score__run=run, score__item=item, user_id=user.pk).exists()


class Review(models.Model):
    """One reviewer's own value for one score (item × subject), with their reason and the
    seconds they spent; kept apart from everyone else's. Their consensus, or an adjudicator,
    gives the score its human value (`settle`)."""

    score = models.ForeignKey(Score, on_delete=models.CASCADE, related_name="reviews")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    value = models.FloatField()
    reason = models.TextField(blank=True)
    seconds = models.FloatField(default=0.0)  # from the item's page opening to the submit
    # Given in blind mode, before the judge's value was shown: an unanchored human label,
    # counted with the blind entries on the agreement page.
    blind = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    MAX_SECONDS = 4 * 3600  # a page left open overnight is not time spent reviewing

    class Meta:
        ordering = ["score", "created_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["score", "user"], name="review_once")]

    @classmethod
    def submit(
        cls,
        score: Score,
        user: Any,
        value: float,
        reason: str,
        seconds: float,
        blind: bool = False,
    ) -> "Review":
        """Record `user`'s review (once: a second submit is refused), then settle the score if
        it has all its reviews."""
        score._check_value(value)
        with transaction.atomic():
            Score.objects.select_for_update().filter(pk=score.pk).first()
            if cls.objects.filter(score=score, user_id=user.pk).exists():
                raise ValidationError("You have reviewed this already; reviews are not edited.")
            target = ReviewPolicy.of(score.run.task_id).reviews_per_item
            if cls.objects.filter(score=score).count() >= target:
                raise ValidationError(f"This score has its {target} reviews already.")
            review = cls.objects.create(
                score=score,
                user=user,
                value=float(value),
                reason=(reason or "").strip(),
                seconds=min(max(float(seconds), 0.0), cls.MAX_SECONDS),
                blind=blind,
            )
            settle(score)
        return review


class Adjudication(models.Model):
    """A score whose reviewers disagreed beyond the subject's threshold: open until an admin
    (or the task's adjudicator) sets the value, seeing every review side by side."""

    score = models.OneToOneField(Score, on_delete=models.CASCADE, related_name="adjudication")
    opened_at = models.DateTimeField(auto_now_add=True)
    spread = models.FloatField(default=0.0)  # of the reviews' values when it opened
    value = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["opened_at", "pk"]
        indexes = [models.Index(fields=["settled_at"])]

    @property
    def is_open(self) -> bool:
        return self.settled_at is None

    def decide(self, value: float, user: Any, reason: str) -> None:
        reason = (reason or "").strip()
        if not reason:
            raise ValidationError({"reason": "Say why this value."})
        score = self.score
        policy = ReviewPolicy.of(score.run.task_id)
        if not policy.may_adjudicate(user):
            raise PermissionDenied("Only an admin or the task's adjudicator adjudicates.")
        with transaction.atomic():
            score.settle_by_people(value, ScoreEvent.Kind.ADJUDICATE, user, reason)
            Adjudication.objects.filter(pk=self.pk).update(
                value=float(value), reason=reason, user=user, settled_at=timezone.now()
            )
        self.refresh_from_db()


def is_categorical(judge: Any) -> bool:
    """Right/wrong subjects (MCQ, pass/fail metrics): majority vote and nominal agreement."""
    return is_two_valued(judge)


def consensus(values: list[float], categorical: bool, worst: float | None) -> float:
    """The mean of the values, or the majority on a categorical subject (a tie to the worst)."""
    if not categorical:
        return sum(values) / len(values)
    counts = Counter(values)
    top = max(counts.values())
    tied = [v for v, n in counts.items() if n == top]
    return worst if worst in tied else min(tied)


def settle(score: Score) -> None:
    """Once a score has its target of reviews: their consensus becomes its value, or, when
    they differ by more than the subject's threshold, it waits for an adjudicator."""
    run = score.run
    policy = ReviewPolicy.of(run.task_id)
    reviews = list(Review.objects.filter(score=score).select_related("user"))
    if len(reviews) < policy.reviews_per_item or is_adjudicated(score):
        return
    values = [r.value for r in reviews]
    spread = max(values) - min(values)
    if spread > policy.threshold(score.subject):
        Adjudication.objects.get_or_create(score=score, defaults={"spread": spread})
        return
    judge = judge_of(run)
    spec = judge.subject(score.subject) or {}
    worst = float(spec["min"]) if "min" in spec else None
    value = consensus(values, is_categorical(judge), worst)
    said = ", ".join(f"{r.user.username} {r.value:g}" for r in reviews)
    reason = f"Consensus of {len(reviews)} reviews ({said}): {value:g}."
    score.settle_by_people(value, ScoreEvent.Kind.CONSENSUS, None, reason)


def settle_task(task_id: int) -> int:
    """After the policy changed (fewer reviews per item, say): settle every score that now
    has its reviews and was waiting. Returns how many were looked at."""
    target = ReviewPolicy.of(task_id).reviews_per_item
    waiting = (
        Score.objects.filter(run__task_id=task_id, adjudication__isnull=True)
        .unreviewed()
        .annotate(n=models.Count("reviews"))
        .filter(n__gte=target)
    )
    scores = list(waiting.select_related("run"))
    for score in scores:
        with transaction.atomic():
            settle(score)
    return len(scores)


def is_adjudicated(score: Score) -> bool:
    """An adjudicated score keeps the adjudicator's value whatever reviews come later."""
    return Adjudication.objects.filter(score=score, settled_at__isnull=False).exists()


# ---- pairwise: people choosing between two answers ----------------------------------------------
class Vote(models.Model):
    """One person's choice between two answers to an item in a pairwise run (the A/B queue):
    which side they saw on the left (randomised per item and pair, seeded, kept here), and
    what they chose for the pair: a, b or a tie."""

    class Choice(models.TextChoices):
        A = "a", "a better"
        B = "b", "b better"
        TIE = "tie", "Tie"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="votes")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    a_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    b_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    a_on_left = models.BooleanField()
    choice = models.CharField(max_length=4, choices=Choice.choices)
    reason = models.TextField(blank=True)
    seconds = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "item", "a_run", "b_run", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "a_run", "b_run", "user"], name="vote_once"
            )
        ]


def a_on_left(run_id: int, item_id: int, a: int, b: int) -> bool:
    """The side a's answer is shown on: drawn once per (run, item, pair) from a seed of
    them, so everyone sees the same sides and a reload never swaps them."""
    return random.Random(f"ab:{run_id}:{item_id}:{a}:{b}").random() < 0.5
