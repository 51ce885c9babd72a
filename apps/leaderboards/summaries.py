"""Per-run score summaries for boards: stored judge-side aggregates plus a live human overlay.

A board over 10 runs × 100k items × 3 subjects must not read 3M scores per request. Per run
we store, per (subject, tag set), the distribution of the judge's values (`stats.Dist`)
and the failed count; SQL aggregates it once (GROUP BY subject, tags_text, status,
judge_value). Only the judging job changes those, and it always moves the run row
(counters, heartbeat, status, epoch), so the run row's fingerprint says when to recompute.

Human-corrected values differ from the judge's only where a score holds an override, and
every override is made through `Score.override`, which writes a ScoreEvent. So on each
request we read the (few) scores of the board's runs that ever had an override event and
move each from its judge bucket to its human bucket. Reviews never make the summary stale
and the board stays fast right after someone overrides a score.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count

from apps.datasets.models import Item
from apps.judges.models import Score, ScoreEvent
from apps.leaderboards.models import RunSummary
from apps.leaderboards.stats import Dist
from apps.runs.models import Run

VERSION = 1  # bump when the stored layout changes: every summary is then recomputed
GroupKey = tuple[str, str]  # (subject, tags_text)


@dataclass
class Group:
    """One subject's scores on the items that share one tag set, in one run."""

    judge: Dist = field(default_factory=Dist)
    judge_failed: int = 0
    human: Dist = field(default_factory=Dist)
    human_failed: int = 0
    overridden: int = 0

    @classmethod
    def from_judge(cls, judge: Dist, failed: int) -> "Group":
        """Before overrides are laid over it, the human side equals the judge's."""
        return cls(judge=judge, judge_failed=failed, human=judge.copy(), human_failed=failed)


@dataclass
class RunScores:
    """Everything a board needs about one judge run."""

    run_id: int
    groups: dict[GroupKey, Group]
    item_counts: dict[str, int]  # items of the dataset per tags_text

    def subjects(self) -> set[str]:
        return {subject for subject, _ in self.groups}


def fingerprint(run: Run) -> str:
    """What the judging job moves whenever it writes scores."""
    parts = (
        VERSION,
        run.status,
        run.done,
        run.failed,
        run.total,
        getattr(run, "epoch", ""),
        run.heartbeat_at.isoformat() if run.heartbeat_at else "",
        run.finished_at.isoformat() if run.finished_at else "",
        run.dataset_id,
    )
    return "|".join(str(part) for part in parts)


def is_valued(status: str, judge_value: float | None) -> bool:
    return status == Score.Status.OK and judge_value is not None


def compute(run: Run) -> RunSummary:
    """Aggregate one run's scores in SQL and store the summary (upsert)."""
    mark = fingerprint(run)
    groups: dict[GroupKey, list] = {}
    rows = (
        Score.objects.filter(run_id=run.pk)
        .values_list("subject", "item__tags_text", "status", "judge_value")
        .annotate(count=Count("pk"))
        .order_by()
    )
    for subject, tags_text, status, judge_value, count in rows.iterator(chunk_size=5000):
        entry = groups.setdefault((subject, tags_text), [Dist(), 0])
        if is_valued(status, judge_value):
            entry[0].add(judge_value, count)
        else:
            entry[1] += count
    item_counts = dict(
        Item.objects.filter(dataset_id=run.dataset_id)
        .values_list("tags_text")
        .annotate(count=Count("pk"))
        .order_by()
    )
    summary, _ = RunSummary.objects.update_or_create(
        run_id=run.pk,
        defaults={
            "fingerprint": mark,
            "groups": [[s, t, dist.to_json(), failed] for (s, t), (dist, failed) in groups.items()],
            "item_counts": item_counts,
        },
    )
    return summary


def load(runs: Iterable[Run]) -> dict[int, RunScores]:
    """The scores of each run, from fresh summaries (recomputing stale ones), overrides applied."""
    runs = list(runs)
    stored = {s.run_id: s for s in RunSummary.objects.filter(run_id__in=[r.pk for r in runs])}
    result: dict[int, RunScores] = {}
    for run in runs:
        summary = stored.get(run.pk)
        if summary is None or summary.fingerprint != fingerprint(run):
            summary = compute(run)
        groups = {
            (subject, tags_text): Group.from_judge(Dist.from_json(dist), failed)
            for subject, tags_text, dist, failed in summary.groups
        }
        result[run.pk] = RunScores(run.pk, groups, dict(summary.item_counts))
    human_overlay(result)
    return result


def human_overlay(scores: dict[int, RunScores]) -> None:
    """Move every currently overridden score from its judge bucket to its human bucket.

    Only scores that ever had an override event can differ from the judge now; `pk__in` a
    subquery on the (small) event table makes SQLite and PostgreSQL look those scores up by
    primary key instead of walking every score of the runs.
    """
    if not scores:
        return
    touched = (
        Score.objects.filter(
            run_id__in=list(scores),
            pk__in=ScoreEvent.objects.filter(kind=ScoreEvent.Kind.OVERRIDE).values("score_id"),
            override_value__isnull=False,
        )
        .values_list(
            "run_id", "subject", "item__tags_text", "status", "judge_value", "override_value"
        )
        .order_by()
    )
    for run_id, subject, tags_text, status, judge_value, override_value in touched:
        group = scores[run_id].groups.get((subject, tags_text))
        if group is None:  # scored after the summary: the fingerprint will catch up
            continue
        group.overridden += 1
        if is_valued(status, judge_value):
            group.human.remove(judge_value)
        else:
            group.human_failed -= 1
        group.human.add(override_value)


def merged(run_scores: RunScores, subject: str, tag: str | None = None) -> tuple[Group, int]:
    """One subject's scores over all items (or the items carrying `tag`), and the item count."""
    out = Group()
    items = 0
    for tags_text, count in run_scores.item_counts.items():
        if tag is None or f"|{tag}|" in tags_text:
            items += count
    for (name, tags_text), group in run_scores.groups.items():
        if name != subject or (tag is not None and f"|{tag}|" not in tags_text):
            continue
        out.judge.merge(group.judge)
        out.judge_failed += group.judge_failed
        out.human.merge(group.human)
        out.human_failed += group.human_failed
        out.overridden += group.overridden
    return out, items


def tags_of(scores: Iterable[RunScores]) -> list[str]:
    counts: dict[str, int] = defaultdict(int)
    for run_scores in scores:
        for tags_text, count in run_scores.item_counts.items():
            for tag in tags_text.strip("|").split("|"):
                if tag:
                    counts[tag] += count
    return sorted(counts)
