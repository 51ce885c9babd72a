from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse

slug_validator = RegexValidator(
    r"^[a-z0-9]+(?:-[a-z0-9]+)*$",
    "Use lowercase letters, digits and single dashes (for example support-qa).",
)


class Task(models.Model):
    """An evaluation project: owns datasets, runs, judges and a leaderboard."""

    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The column mapping of the last upload, offered again for the next one.
    last_mapping = models.JSONField(default=dict, blank=True)
    # Each new response set in this task is judged by this judge automatically.
    default_judge = models.ForeignKey(
        "judges.Judge", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    default_judge_endpoint = models.ForeignKey(
        "runs.Endpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("datasets:task-detail", args=[self.slug])


class DatasetQuerySet(models.QuerySet["Dataset"]):
    def ready(self) -> "DatasetQuerySet":
        return self.filter(status=Dataset.Status.READY)


class Dataset(models.Model):
    """One uploaded file turned into items. Frozen once a run uses it."""

    class Status(models.TextChoices):
        IMPORTING = "importing", "Importing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        JSON = "json", "JSON"
        JSONL = "jsonl", "JSONL"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    version = models.PositiveIntegerField(default=1)
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="next_versions"
    )
    file_name = models.CharField(max_length=255, blank=True)
    format = models.CharField(max_length=8, choices=Format.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IMPORTING)
    error = models.TextField(blank=True)
    progress = models.PositiveIntegerField(default=0)  # rows written so far while importing
    columns = models.JSONField(default=list)  # every column of the file, in order
    # {"id_column": str|None, "input_columns": [...], "reference_column": str|None,
    #  "tags_column": str|None, "response_columns": [...]}
    mapping = models.JSONField(default=dict)
    row_count = models.PositiveIntegerField(default=0)
    tag_counts = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = DatasetQuerySet.as_manager()

    class Meta:
        ordering = ["task", "name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "name", "version"], name="dataset_unique_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def get_absolute_url(self) -> str:
        return reverse("datasets:dataset-detail", args=[self.pk])

    @property
    def is_frozen(self) -> bool:
        """Items of a dataset never change once a run has used it."""
        return self.runs.exists()

    @property
    def response_columns(self) -> list[str]:
        return list(self.mapping.get("response_columns") or [])

    @property
    def reference_column(self) -> str | None:
        return self.mapping.get("reference_column") or None

    @property
    def input_columns(self) -> list[str]:
        return list(self.mapping.get("input_columns") or [])


class ItemQuerySet(models.QuerySet["Item"]):
    def search(self, text: str) -> "ItemQuerySet":
        text = text.strip().lower()
        return self.filter(search_text__contains=text) if text else self

    def tagged(self, tag: str) -> "ItemQuerySet":
        return self.filter(tags_text__contains=f"|{tag}|") if tag else self


class Item(models.Model):
    """One row of a dataset: every field as JSON, plus what the mapping picked out."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()  # 0-based row position in the file
    key = models.CharField(max_length=255)  # the id column, else the position
    fields = models.JSONField(default=dict)
    reference = models.TextField(blank=True)
    tags = models.JSONField(default=list)
    # Denormalised for fast filtering at 100k+ items on SQLite and PostgreSQL alike.
    tags_text = models.TextField(blank=True)  # "|tag1|tag2|"
    search_text = models.TextField(blank=True)  # lowercased values of all fields

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="item_unique_key"),
            models.UniqueConstraint(fields=["dataset", "position"], name="item_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id}:{self.key}"

    def field(self, name: str, default: Any = "") -> Any:
        return self.fields.get(name, default)
