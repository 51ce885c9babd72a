"""Per-run score summaries for boards: stored judge-side aggregates plus a live human overlay.

A board over 10 runs × 100k items × 3 subjects must not read 3M scores per request. Per run
we store, per (subject, tag set), the distribution of the judge's values (`stats.Dist`)
and the failed count; SQL aggregates it once (GROUP BY subject, tags_text, status,
judge_value). Only the judging job changes those, and it always moves the run row
(counters, heartbeat, status, launch), so the run row's fingerprint says when to recompute.

Human-corrected values differ from the judge's only where a score holds an override, and
every override is made through `Score.override`, which writes a ScoreEvent. So on each
request we read the (few) scores of the board's runs that ever had an override event and
move each from its judge bucket to its human bucket. Reviews never make the summary stale
and the board stays fast right after someone overrides a score.

The overall (weighted) score combines subjects measured on the same items, so its CI has to
resample items, not subjects one by one. For that the summary also keeps, per tag set, how
many items share each vector of judge values across the subjects (a rubric with three
subjects on 1–5 has at most a few hundred); an override moves its item's whole vector.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count

from apps.datasets.models import Item
from apps.judges.models import Score, ScoreEvent
from apps.leaderboards.models import RunSummary
from apps.leaderboards.stats import Dist
from apps.runs.models import Run

VERSION = 2  # bump when the stored layout changes: every summary is then recomputed
VECTOR_LIMIT = 300  # most distinct per-item vectors a tag set keeps (bounds the bootstrap)
GroupKey = tuple[str, str]  # (subject, tags_text)
Vector = tuple[float | None, ...]  # one item's values, in `RunScores.vector_subjects` order


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
class Vectors:
    """Per-item value vectors of one tag set: how many items share each, judge-only and
    human-corrected."""

    judge: Counter[Vector]
    human: Counter[Vector]


@dataclass
class RunScores:
    """Everything a board needs about one judge run."""

    run_id: int
    groups: dict[GroupKey, Group]
    item_counts: dict[str, int]  # items of the dataset per tags_text
    vector_subjects: list[str] = field(default_factory=list)
    vectors: dict[str, Vectors | None] = field(default_factory=dict)  # None: over the limit

    def subjects(self) -> set[str]:
        return {subject for subject, _ in self.groups}


def fingerprint(run: Run) -> str:
    """The run's results fingerprint, and the summary format's version."""
    return f"{VERSION}|{run.results_fingerprint}"


def valued(status: str, judge_value: float | None) -> float | None:
    """The judge's value of a score that counts (an OK score); None for a failed one."""
    return float(judge_value) if status == Score.Status.OK and judge_value is not None else None


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
        if (value := valued(status, judge_value)) is not None:
            entry[0].add(value, count)
        else:
            entry[1] += count
    item_counts = dict(
        Item.objects.filter(dataset_id=run.dataset_id)
        .values_list("tags_text")
        .annotate(count=Count("pk"))
        .order_by()
    )
    subjects = sorted({subject for subject, _ in groups})
    summary, _ = RunSummary.objects.update_or_create(
        run_id=run.pk,
        defaults={
            "fingerprint": mark,
            "groups": [[s, t, dist.to_json(), failed] for (s, t), (dist, failed) in groups.items()],
            "item_counts": item_counts,
            # A running run's summary is rebuilt on every board request (its fingerprint keeps
            # moving): the per-item scan waits until the run has ended.
            "vectors": {"subjects": subjects, "groups": item_vectors(run, subjects)}
            if run.is_terminal
            else {},
        },
    )
    return summary


def item_vectors(run: Run, subjects: list[str]) -> list[list]:
    """Per tag set, [[vector, count], ...] of the items' judge values (None where failed or
    not scored), or None for a tag set with more than VECTOR_LIMIT distinct vectors."""
    index = {subject: i for i, subject in enumerate(subjects)}
    counts: dict[str, Counter[Vector]] = defaultdict(Counter)
    rows = (
        Score.objects.filter(run_id=run.pk)
        .values_list("item_id", "item__tags_text", "subject", "status", "judge_value")
        .order_by("item_id")
    )
    vector: list[float | None] = [None] * len(subjects)
    current, tags = None, ""
    for item_id, tags_text, subject, status, judge_value in rows.iterator(chunk_size=5000):
        if item_id != current:
            if current is not None:
                counts[tags][tuple(vector)] += 1
            current, tags, vector = item_id, tags_text, [None] * len(subjects)
        if (value := valued(status, judge_value)) is not None:
            vector[index[subject]] = value
    if current is not None:
        counts[tags][tuple(vector)] += 1
    return [
        [tags_text, [[list(v), n] for v, n in counter.items()]]
        if len(counter) <= VECTOR_LIMIT
        else [tags_text, None]
        for tags_text, counter in counts.items()
    ]


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
        vectors: dict[str, Vectors | None] = {}
        for tags_text, entries in summary.vectors.get("groups", []):
            if entries is None:
                vectors[tags_text] = None
            else:
                counter = Counter({tuple(vector): n for vector, n in entries})
                vectors[tags_text] = Vectors(judge=counter, human=counter.copy())
        result[run.pk] = RunScores(
            run.pk,
            groups,
            dict(summary.item_counts),
            vector_subjects=list(summary.vectors.get("subjects", [])),
            vectors=vectors,
        )
    human_overlay(result)
    return result


def human_overlay(scores: dict[int, RunScores]) -> None:
    """Move every currently overridden score from its judge bucket to its human bucket.

    Only scores that ever had an event that sets a value (override, consensus, adjudication) can differ from the judge now; `pk__in` a
    subquery on the (small) event table makes SQLite and PostgreSQL look those scores up by
    primary key instead of walking every score of the runs.
    """
    if not scores:
        return
    touched = (
        Score.objects.filter(
            run_id__in=list(scores),
            pk__in=ScoreEvent.objects.filter(kind__in=ScoreEvent.SETS_VALUE).values("score_id"),
            override_value__isnull=False,
        )
        .values_list(
            "run_id",
            "item_id",
            "subject",
            "item__tags_text",
            "status",
            "judge_value",
            "override_value",
        )
        .order_by()
    )
    items: dict[tuple[int, int], str] = {}
    for run_id, item_id, subject, tags_text, status, judge_value, override_value in touched:
        group = scores[run_id].groups.get((subject, tags_text))
        if group is None:  # scored after the summary: the fingerprint will catch up
            continue
        if override_value is None:  # the query asks for overridden scores only
            continue
        group.overridden += 1
        if (value := valued(status, judge_value)) is not None:
            group.human.remove(value)
        else:
            group.human_failed -= 1
        group.human.add(override_value)
        items[run_id, item_id] = tags_text
    if items:
        move_vectors(scores, items)


def move_vectors(scores: dict[int, RunScores], items: dict[tuple[int, int], str]) -> None:
    """Move each overridden item's vector from its judge-only to its human-corrected value."""
    vectors: dict[tuple[int, int], tuple[list, list]] = {}
    rows = Score.objects.filter(
        run_id__in={run_id for run_id, _ in items}, item_id__in={item_id for _, item_id in items}
    ).values_list("run_id", "item_id", "subject", "status", "judge_value", "override_value")
    for run_id, item_id, subject, status, judge_value, override_value in rows.order_by():
        run_scores = scores[run_id]
        if (run_id, item_id) not in items or subject not in run_scores.vector_subjects:
            continue
        width = len(run_scores.vector_subjects)
        judge, human = vectors.setdefault((run_id, item_id), ([None] * width, [None] * width))
        at = run_scores.vector_subjects.index(subject)
        judge[at] = valued(status, judge_value)
        human[at] = float(override_value) if override_value is not None else judge[at]
    for (run_id, item_id), (judge, human) in vectors.items():
        counts = scores[run_id].vectors.get(items[run_id, item_id])
        if counts is None or counts.human[tuple(judge)] <= 0:
            continue  # over the limit, or scored after the summary
        counts.human[tuple(judge)] -= 1
        counts.human[tuple(human)] += 1


def vectors_of(run_scores: RunScores, mode: str, tag: str | None = None) -> Counter[Vector] | None:
    """The items' value vectors (of the items carrying `tag`), or None if a tag set kept none."""
    out: Counter[Vector] = Counter()
    for tags_text, counts in run_scores.vectors.items():
        if tag is not None and f"|{tag}|" not in tags_text:
            continue
        if counts is None:
            return None
        out.update(counts.human if mode == "human" else counts.judge)
    return +out  # without vectors counted down to zero


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
