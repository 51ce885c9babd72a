from django.db import models

from apps.runs.models import Run


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
