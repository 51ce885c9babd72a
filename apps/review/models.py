from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.datasets.models import Item
from apps.runs.models import Run


class ReviewLock(models.Model):
    """A short claim on an item of a judge run's queue, so two reviewers are not served it at once."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="review_locks")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "item"], name="review_lock_once")]

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()
