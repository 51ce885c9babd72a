from typing import Any

from django.conf import settings
from django.db import models

from apps.datasets.models import Dataset, Item, Task
from apps.runs.models import Run


class Import(models.Model):
    """Results made by another evaluation tool (Inspect AI, lm-evaluation-harness, promptfoo,
    OpenAI-format JSONL) brought into a task as one dataset, a response set per model and a
    judge run per scorer: which tool and version wrote them, from which files."""

    class Tool(models.TextChoices):
        INSPECT = "inspect", "Inspect AI"
        LM_EVAL = "lm_eval", "lm-evaluation-harness"
        PROMPTFOO = "promptfoo", "promptfoo"
        OPENAI = "openai", "OpenAI-format JSONL"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="imports")
    dataset = models.OneToOneField(Dataset, on_delete=models.CASCADE, related_name="source")
    tool = models.CharField(max_length=16, choices=Tool.choices)
    # The version the files say wrote them ("0.3.285"); "" when a format does not say.
    tool_version = models.CharField(max_length=64, blank=True)
    file_names = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        version = f" {self.tool_version}" if self.tool_version else ""
        return f"{self.get_tool_display()}{version}: {', '.join(self.file_names)}"


class ImportedLog(models.Model):
    """One model's results in an import (an Inspect log, a promptfoo provider…): its response
    set, and what the file said beside the samples, kept to write the file back out with the
    reviewers' scores."""

    source = models.ForeignKey(Import, on_delete=models.CASCADE, related_name="logs")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="imported_from")
    file_name = models.CharField(max_length=255)
    # The file less its samples (an Inspect log's eval, plan, results, stats…).
    header: Any = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"{self.file_name} ({self.run.label})"


class ImportedRecord(models.Model):
    """One sample of a log as the tool wrote it (an Inspect sample of one epoch…), kept so
    the export gives the tool its own record back with the reviewers' values added."""

    log = models.ForeignKey(ImportedLog, on_delete=models.CASCADE, related_name="records")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    epoch = models.PositiveIntegerField(default=0)
    position = models.PositiveIntegerField()  # order in the file
    data: Any = models.JSONField(default=dict)

    class Meta:
        ordering = ["log", "position"]
        constraints = [
            models.UniqueConstraint(fields=["log", "position"], name="imported_record_once")
        ]
