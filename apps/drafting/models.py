"""Dataset drafting: generators (three prompts), the units of their generation runs, and the
draft items people review before a draft becomes a dataset (apps.drafting.drafts).

The tables were made by the runs app (its migrations 0012 to 0017) and keep their names."""

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from apps.datasets.models import Dataset, Frozen, Item, Task, Versioned
from apps.runs.models import ErrorKind, Run


class GeneratorQuerySet(models.QuerySet["Generator"]):
    def latest_versions(self) -> "GeneratorQuerySet":
        """The newest version of every generator name (one row per task and name)."""
        newer = Generator.objects.filter(
            task=models.OuterRef("task"),
            name=models.OuterRef("name"),
            version__gt=models.OuterRef("version"),
        )
        return self.exclude(models.Exists(newer))


class Generator(Versioned):
    """Three prompts that make a draft dataset with a model (apps.drafting.drafts): content
    (e.g. ten facts about a fictional world), questions about it, and their answers. Each unit
    of a dataset generation run asks them in turn; a later prompt sees the earlier replies as
    `{{ content }}` and `{{ questions }}`. Editing makes a new version."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="generators")
    system_message = models.TextField(blank=True)
    content_prompt = models.TextField()
    questions_prompt = models.TextField()
    answers_prompt = models.TextField()

    objects = GeneratorQuerySet.as_manager()

    class Meta:
        db_table = "runs_generator"  # made in the runs app, before drafting had its own
        ordering = ["task", "name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "name", "version"], name="generator_unique_version"
            )
        ]

    def get_absolute_url(self) -> str:
        return reverse("drafting:generator-detail", args=[self.pk])

    CONTENT_FIELDS = ("system_message", "content_prompt", "questions_prompt", "answers_prompt")


class DraftSetup(models.Model):
    """What a dataset generation run asks: its generator's version. A row of this app's, so
    that runs, earlier in the flow, never names drafting."""

    run = models.OneToOneField(
        Run, primary_key=True, on_delete=models.CASCADE, related_name="draft_setup"
    )
    # "runs": what `Versioned.is_used` asks of every versioned model (a used version is frozen).
    generator = models.ForeignKey(Generator, on_delete=models.PROTECT, related_name="runs")


class DraftUnit(models.Model):
    """One unit of a dataset generation run: a content → questions → answers chain, written
    once per (run, index). Its items wait in `DraftItem` for review."""

    class Status(models.TextChoices):
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="draft_units")
    index = models.PositiveIntegerField()  # 0-based; the unit's seed is the endpoint's + index
    status = models.CharField(max_length=8, choices=Status.choices)
    content = models.TextField(blank=True)
    seed = models.IntegerField(null=True, blank=True)
    error_kind = models.CharField(max_length=32, choices=ErrorKind.choices, blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0.0)
    launch = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "runs_draftunit"
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="draft_unit_once")]

    @property
    def number(self) -> int:
        return self.index + 1


class DraftItemQuerySet(models.QuerySet["DraftItem"]):
    def kept(self) -> "DraftItemQuerySet":
        return self.filter(decision__in=DraftItem.KEPT)

    def undecided(self) -> "DraftItemQuerySet":
        return self.filter(decision=DraftItem.Decision.PENDING)


class DraftItem(models.Model):
    """One generated (content, question, reference) of a draft dataset, with a person's
    decision. `generated` keeps what the model wrote, so an edit never loses it."""

    class Decision(models.TextChoices):
        PENDING = "pending", "To review"
        APPROVED = "approved", "Approved"
        EDITED = "edited", "Edited"
        REJECTED = "rejected", "Rejected"

    KEPT = (Decision.APPROVED, Decision.EDITED)
    TEXT_FIELDS = ("content", "question", "reference")

    unit = models.ForeignKey(DraftUnit, on_delete=models.CASCADE, related_name="items")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="draft_items")
    generator = models.ForeignKey(Generator, on_delete=models.PROTECT, related_name="draft_items")
    number = models.PositiveIntegerField()  # 0-based question number within the unit
    content = models.TextField()
    question = models.TextField()
    reference = models.TextField(blank=True)
    generated = models.JSONField(default=dict)  # {"content", "question", "reference"} as made
    decision = models.CharField(max_length=16, choices=Decision.choices, default=Decision.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # The dataset item it became when the draft was published (kept items only).
    item = models.OneToOneField(
        Item, null=True, blank=True, on_delete=models.SET_NULL, related_name="draft_item"
    )

    objects = DraftItemQuerySet.as_manager()

    class Meta:
        db_table = "runs_draftitem"
        ordering = ["dataset", "unit__index", "number"]
        constraints = [models.UniqueConstraint(fields=["unit", "number"], name="draft_item_once")]
        indexes = [models.Index(fields=["dataset", "decision"])]

    @property
    def key(self) -> str:
        """The item key it gets on publishing: unit and question, 1-based ("3-2")."""
        return f"{self.unit.index + 1}-{self.number + 1}"

    def decide(self, decision: str, user: Any, **texts: str) -> None:
        """Approve, reject, or edit (texts: content/question/reference); an edit that changes
        nothing is an approval. Only while the dataset is a draft."""
        if self.dataset.status != Dataset.Status.DRAFT:
            raise Frozen(
                f"{self.dataset} is {self.dataset.draft_state}: its items no longer change."
            )
        if decision not in self.Decision.values:
            raise ValueError(f"Unknown decision {decision!r}.")
        if decision != self.Decision.REJECTED:
            for name in self.TEXT_FIELDS:
                if name in texts:
                    setattr(self, name, texts[name])
        if decision in self.KEPT:
            # What is kept is what the item says now: changed from the model's text, an edit.
            changed = any(getattr(self, n) != self.generated.get(n, "") for n in self.TEXT_FIELDS)
            decision = self.Decision.EDITED if changed else self.Decision.APPROVED
        self.decision = decision
        self.decided_by = user if getattr(user, "pk", None) else None
        self.decided_at = None if decision == self.Decision.PENDING else timezone.now()
        self.save()
