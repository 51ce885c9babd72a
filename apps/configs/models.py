from django.conf import settings
from django.db import models

from apps.datasets.models import Task


class AppliedConfig(models.Model):
    """A task's configuration file as it was last applied (`manage.py apply`): the endpoints it
    named, in its order, so that `export_config` writes them back even before a run uses them,
    and the text itself, for who-changed-what."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="applied_config")
    endpoints = models.JSONField(default=list)  # endpoint names, in the file's order
    text = models.TextField(blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    applied_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.task}: configuration applied {self.applied_at:%Y-%m-%d %H:%M}"
