from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from apps.datasets.models import Item
from apps.judges.models import Score
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
