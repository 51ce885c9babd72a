from django.db import models

from apps.datasets.models import Dataset, Task
from apps.runs.models import Run


class BoardSettings(models.Model):
    """A task's settings of its leaderboard, owned by leaderboards (the task, in datasets,
    knows no board). A task without a row has the defaults (`of`)."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="board_settings")
    # Warn on the board when the default judge's agreement with people (the share of reviewed
    # scores people left at the judge's value) falls below this in a week; None: never.
    alignment_threshold = models.FloatField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.task}: board settings"

    @classmethod
    def of(cls, task_id: int) -> "BoardSettings":
        """The task's row (unsaved defaults when it has none): for reading."""
        return cls.objects.filter(task_id=task_id).first() or cls(task_id=task_id)


class RunSummary(models.Model):
    """A judge run's scores boiled down for leaderboards, so a board over millions of scores
    reads a few small rows instead of every score.

    Holds what only the judging job changes: per (subject, tag set) the distribution of the
    judge's values and the failed count, plus the dataset's item counts per tag set. Human
    overrides are laid over it live on each request (see `summaries.human_overlay`), so a
    review never makes it stale. It is recomputed when the run row says the job wrote
    something since (`fingerprint`).
    """

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="leaderboard_summary"
    )
    fingerprint = models.CharField(max_length=300)
    # [[subject, tags_text, dist, failed], ...]; dist as `stats.Dist.to_json`.
    groups = models.JSONField(default=list)
    item_counts = models.JSONField(default=dict)  # {tags_text: number of items}
    # For the overall score's CI: {"subjects": [...], "groups": [[tags_text, entries], ...]}, per
    # tag set the distinct per-item vectors of judge values (None: failed or unscored) with
    # their counts, [[vector, count], ...]; None when a tag set has too many distinct vectors.
    vectors = models.JSONField(default=dict)
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"summary of run #{self.run_id}"


class StoredArrays(models.Model):
    """Arrays a page over every item reads at once, kept in the database so that the first
    visit in a fresh web process (every gunicorn worker has its own memos) reads one row, not
    100k items or 300k scores (apps.leaderboards.items): a dataset's item ids, keys, tags and
    the order people count keys in, or a judge run's values per item. Written by the job that
    runs when a judge run finishes, or by the first page that needs them; `state` says what
    they were computed from (a run's results), so a stale row is computed again."""

    dataset = models.OneToOneField(
        Dataset, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    state = models.CharField(max_length=300, blank=True)
    data = models.BinaryField()  # numpy's .npz, read without pickle
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(dataset__isnull=True, run__isnull=False)
                | models.Q(dataset__isnull=False, run__isnull=True),
                name="stored_arrays_of_one_owner",
            )
        ]

    def __str__(self) -> str:
        return f"arrays of run #{self.run_id}" if self.run_id else f"arrays of {self.dataset}"
