from django.conf import settings
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
    reads a few small rows instead of every score (apps.leaderboards.summaries).

    Per (subject, tag set) the distribution of the judge's values and the failed count, the
    same human-corrected with the overridden count, the dataset's item counts per tag set, and
    the scores holding a person's value as counted. The judge side is recomputed when the run
    row says the job wrote something since (`fingerprint`); people's changes are counted in as
    they come, by their events after `event_id` (`summaries.catch_up`).
    """

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="leaderboard_summary"
    )
    fingerprint = models.CharField(max_length=300)
    # [[subject, tags_text, judge dist, failed, human dist, human failed, overridden], ...];
    # dists as `stats.Dist.to_json`.
    groups = models.JSONField(default=list)
    item_counts = models.JSONField(default=dict)  # {tags_text: number of items}
    # For the overall score's CI: {"subjects": [...], "groups": [[tags_text, entries], ...]}, per
    # tag set the distinct per-item (judge vector, human vector) pairs (None: failed or
    # unscored) with their counts, [[judge, human, count], ...]; None when a tag set has too
    # many distinct pairs. Empty while the run is going.
    vectors = models.JSONField(default=dict)
    # The scores holding a person's value as counted: [[score id, item id, subject, tags_text,
    # value], ...] (read only when a change is counted in, or for per-item human values).
    held = models.JSONField(default=list)
    # Every change whose event is newer may not be counted yet (looked at on each read).
    event_id = models.BigIntegerField(default=0)
    # Names the human-corrected state; new whenever it changes (keys memos in every process).
    state = models.CharField(max_length=32, blank=True)
    flaky = models.PositiveIntegerField(null=True, blank=True)  # items whose epochs disagree
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"summary of run #{self.run_id}"


class StoredResult(models.Model):
    """The result of a pure computation for boards, keyed by a digest of everything it
    depends on (a run's results fingerprint and summary state, the board's settings), so a
    restarted process reads what any process computed instead of computing it again: a
    model's cells and intervals, a pair's test (apps.leaderboards.memo.Stored). Never stale,
    since a change makes a new key; rows no board asks for any more are only unused."""

    key = models.CharField(max_length=64, primary_key=True)
    value = models.TextField()  # JSON (NaN allowed)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"stored result {self.key[:12]}"


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


class StopRule(models.Model):
    """A judge run set to stop itself once its comparison with a baseline run on the same items
    has decided (#31.4): the anytime-valid confidence sequence of run − baseline on `subject`
    (apps.leaderboards.sequential), checked as results arrive (apps.leaderboards.stopping).
    It stops the run once: a resume after it goes on to the end. The last check is kept."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="stop_rule")
    baseline = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    subject = models.CharField(max_length=200)
    # "No difference larger than δ" decides too when > 0; 0: only "run better / baseline better".
    delta = models.FloatField(default=0.0)
    # The last check: its decision (apps.leaderboards.sequential states), the paired items it
    # saw, the sequence then, and the paired item at which it decided.
    state = models.CharField(max_length=16, default="going")
    checked_n = models.PositiveIntegerField(default=0)
    # The slower run's finished items at the last check (when the next one is due).
    checked_mark = models.PositiveIntegerField(default=0)
    mean = models.FloatField(null=True, blank=True)
    low = models.FloatField(null=True, blank=True)
    high = models.FloatField(null=True, blank=True)
    decided_at = models.PositiveIntegerField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)  # when it stopped the run
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"stop run #{self.run_id} when decided against run #{self.baseline_id}"
